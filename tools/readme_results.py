"""Generate the README's measured tables from saved ``results.json`` files, or check them.

The tables between ``<!-- results:KEY -->`` and ``<!-- /results:KEY -->`` in README.md and in the
documentation pages under docs/ are never
edited by hand: they are rendered from ``docs/results/KEY.json`` (a run's results.json with the
figures stripped), and ``<!-- results:tally -->`` from all of them. A test runs ``--check``.

    .venv/bin/divelab reproduce e163 --scale quick --out runs/q
    .venv/bin/python tools/readme_results.py save runs/q      # -> docs/results/backtrack.json
    .venv/bin/python tools/readme_results.py write            # rewrite README blocks
    .venv/bin/python tools/readme_results.py check            # exit 1 if README disagrees
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from divelab.claims import NOT_COUNTED
from divelab.report import checks, load_results, public
from divelab.report.competence import competence_text
from divelab.report.render import RESULTS_VERSION, claims_table_md, tallies_by_kind
from divelab.verdicts import RULES_VERSION

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results"
BLOCK = re.compile(r"(<!-- results:(?P<key>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=key) -->)", re.S)


FULL = RESULTS / "full"


def save(run_dir: str) -> list[Path]:
    """Copy each reproduction of a run into docs/results/KEY.json (docs/results/full/KEY.json for a full-scale
    run), without figures (kept small)."""
    out = []
    for rep in load_results(run_dir):
        d = rep.to_dict()
        d["figures"] = []
        where = FULL if rep.scale == "full" else RESULTS
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{rep.system}.json"
        path.write_text(json.dumps({"divelab_results_version": RESULTS_VERSION, "reproductions": [d]},
                                   indent=1, default=str) + "\n")
        out.append(path)
    return out


STABILITY = RESULTS / "stability.json"  # the cross-ISA comparison (tools/cross_isa.py), not a run


def result_files(where: Path = RESULTS) -> list[Path]:
    """The saved runs in ``where`` (one results file per system), without the cross-ISA comparison."""
    return [p for p in sorted(where.glob("*.json")) if p != STABILITY]


def _reps(where: Path = RESULTS) -> dict[str, object]:
    reps = {}
    for path in result_files(where):
        for rep in load_results(path):
            reps[rep.system] = rep
    return reps


def serving_before_after(b: dict) -> str:
    """The server now against an earlier version: medians over interleaved rounds, ratio with interval."""
    m = b["machine"]
    lines = [f"`{b['command']}`: {b['rounds']} interleaved rounds against revision `{b['rev_then']}`, "
             f"{m['cpus']} CPUs, {m['threads']} torch threads, load average before {m['loadavg_before'][0]:.2f}.", "",
             "| users | per-user tok/s now / then | ratio [95% CI] | total tok/s now / then | ratio [95% CI] |",
             "|---|---|---|---|---|"]
    for level, f in b["summary"].items():
        pu, tt = f["per_user_tok_s_mean"], f["total_throughput_tok_s"]
        lines.append(f"| {level.split()[0]} | {pu['now_median']:.0f} / {pu['then_median']:.0f} | "
                     f"{pu['ratio_median']:.2f} [{pu['ratio_ci'][0]:.2f}, {pu['ratio_ci'][1]:.2f}] | "
                     f"{tt['now_median']:.0f} / {tt['then_median']:.0f} | "
                     f"{tt['ratio_median']:.2f} [{tt['ratio_ci'][0]:.2f}, {tt['ratio_ci'][1]:.2f}] |")
    return "\n".join(lines) + "\n"


def scaleout(b: dict) -> str:
    """A multi-seed reproduction and a batch of rollouts in process and on Ray (benchmarks/scaleout.json)."""
    r, ro = b["reproduction"], b["rollouts"]
    same = r["ray_1cpu_same_claims"] and r["ray_2cpu_same_claims"]
    seeds = f"{r['seeds'][0]}-{r['seeds'][-1]}"
    lines = [f"`python benchmarks/scaleout.py --system {r['system']} --scale {r['scale']} --seeds {seeds}`: "
             f"{b['cpus']} CPUs, load average at the start {b['load_average_at_start']:.2f}.", "",
             "| what | in process | Ray, 1 CPU / 1 actor | Ray, 2 CPUs / 2 actors |", "|---|---|---|---|",
             f"| {r['system']}, {r['scale']}, {len(r['seeds'])} seeds (claims "
             f"{'identical' if same else 'DIFFERENT'} in every arm) | {r['inprocess_s']:.1f} s | {r['ray_1cpu_s']:.1f} s "
             f"(+{r['ray_1cpu_startup_s']:.1f} s start-up) | {r['ray_2cpu_s']:.1f} s (+{r['ray_2cpu_startup_s']:.1f} s start-up) |",
             f"| one GRPO batch of rollouts ({ro['games']} games × {ro['group_size']} episodes), median | "
             f"{ro['inprocess_1']['median_s'] * 1e3:.1f} ms | {ro['ray_1']['median_s'] * 1e3:.1f} ms | "
             f"{ro['ray_2']['median_s'] * 1e3:.1f} ms |", "",
             f"Two Ray workers against one: {r['ray_1cpu_s'] / r['ray_2cpu_s']:.2f}× on the reproductions, "
             f"{ro['speedup_ray2_vs_ray1']:.2f}× on rollouts; two Ray workers against the in-process path: "
             f"{r['speedup_2cpu_vs_inprocess']:.2f}× on the reproductions."]
    return "\n".join(lines) + "\n"


def dspark_speed(b: dict) -> str:
    """DSpark on SmolLM2 against every peer at batch 1 (benchmarks/serving_dspark.json)."""
    t = b["targets"]["smollm2"]
    mb, ma = b["machine_before"], b["machine_after"]
    meta = t["assets"]
    curve = meta["learning_curve"]
    lines = [f"`{b['command']}`: {t['prompts']} held-out chat prompts × {b['args']['max_new_tokens']} new tokens, "
             f"interleaved, {b['threads']} torch threads, {mb['cpus']} CPUs, load average "
             f"{mb['load_average_1_5_15'][0]:.2f} before and {ma['load_average_1_5_15'][0]:.2f} after. Drafter: "
             f"γ={t['gamma']}, {t['drafter_parameters'] / 1e6:.1f} M trained parameters, a draft vocabulary of "
             f"{t['draft_vocab']} tokens ({meta['draft_vocab_coverage']:.1%} of held-out response tokens), trained "
             f"on {meta['response_tokens']} response tokens of SmolLM2's own; expected greedy τ on held-out topics "
             f"{curve[0]['tau_greedy']:.2f} untrained → {curve[-1]['tau_greedy']:.2f} after "
             f"{curve[-1]['step']} steps" + (f"; on held-out HumanEval requests (code) {curve[0]['tau_greedy_code']:.2f}"
                                             f" → {curve[-1]['tau_greedy_code']:.2f}" if "tau_greedy_code" in curve[-1]
                                             else "") + ".", ""]
    if "machine" in b:  # what changes the numbers: the CPU and the kernels torch ran
        m = b["machine"]
        lines[0] = lines[0].replace(f"{mb['cpus']} CPUs,", f"{mb['cpus']} CPUs ({m['cpu_model']}, torch kernels "
                                    f"{m['torch_cpu_capability']}),")
    for temp, rows in t["batch_size_1"].items():
        lines += [f"**{temp}**", "", "| decoder | tok/s | × generate | × same engine's plain | × llama.cpp | τ | output |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in rows.items():
            ci = r.get("speedup_per_prompt_ci95")
            sp = (f"{r['speedup_per_prompt_mean']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci
                  else f"{r['speedup_vs_generate']:.2f}")
            vs = [_ratio_ci(r.get(k)) for k in ("speedup_vs_plain_same_engine", "speedup_vs_llama_cpp")]
            tau = f"{r['tau']:.2f}" if "tau" in r else "—"
            same = ("identical to greedy" if r.get("identical_to_greedy") else "differs from greedy") \
                if "identical_to_greedy" in r else "sampled (exactness: χ² tests in the suite)"
            lines.append(f"| {name} | {r['tokens_per_s']:.1f} | {sp} | {vs[0]} | {vs[1]} | {tau} | {same} |")
        lines += ["", "Ratios are means of per-prompt ratios with a 95% t-interval over prompts. \"Identical to greedy\": "
                  "the output equals HF greedy decoding, or for a lean-engine row the lean engine's own plain greedy "
                  "decoding in its weight format."] if temp == "T=0" else []
        lines.append("")
    fixed = next(r for n, r in t["batch_size_1"]["T=0"].items() if n.startswith("DSpark Markov, fixed"))
    sps = dict(zip(t["sps"]["B"], t["sps"]["steps_per_s"], strict=True))
    lines += [f"Where a DSpark round's time goes (fixed γ={t['gamma']}, T=0): drafting "
              f"{fixed['profile_share']['drafting']:.0%}, the target's verification forward (with acceptance) "
              f"{fixed['profile_share']['verification']:.0%}. The target's measured speed on this CPU, steps per "
              "second by tokens per step: " + ", ".join(f"{int(b)}: {v:.1f}" for b, v in sps.items())
              + f" — a step over 2 tokens costs {sps[1.0] / sps[2.0]:.2f}× a 1-token step.", ""]
    return "\n".join(lines)


def _ratio_ci(r: dict | None) -> str:
    if not r:
        return "—"
    return f"{r['mean']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r.get("ci95") else f"{r['mean']:.2f}"


def dspark_served(b: dict) -> str:
    """`divelab serve` on SmolLM2 with and without the drafter, closed-loop users (serving_load_smollm2.json)."""
    lines = [f"`{b['command']}`: {b['requests_per_user']} requests per user, {b['max_tokens']} tokens each, "
             f"{b['threads']} torch threads, {b['cpus']} CPUs, load average {b['load_average_before'][0]:.2f} "
             f"before and {b['load_average_after'][0]:.2f} after.", "",
             "| users | per-user tok/s DSpark / plain | × | total tok/s DSpark / plain | × | τ | same texts |",
             "|---|---|---|---|---|---|---|"]
    if b.get("repeats", 1) > 1:
        lines[0] = lines[0].replace(" requests per user,", f" requests per user, {b['repeats']} interleaved repeats "
                                    "of the whole sweep (mean over repeats; × with a 95% t-interval over repeats),")
        lines[0] = lines[0].replace(" after.", f" after; engine {b.get('engine', 'default')}, weights {b.get('fmt')}.")
    for point, r in b["results"].items():
        d, p = r["dspark"], r["plain"]
        pu = _ratio_ci({"mean": r["per_user_speedup"], "ci95": r.get("per_user_speedup_ci95")})
        tp = _ratio_ci({"mean": r["throughput_ratio"], "ci95": r.get("throughput_ratio_ci95")})
        lines.append(f"| {point.split()[0]} | {d['per_user_tok_s_mean']:.1f} / {p['per_user_tok_s_mean']:.1f} | "
                     f"{pu} | {d['total_throughput_tok_s']:.1f} / {p['total_throughput_tok_s']:.1f} | {tp} | "
                     f"{d['tau']:.2f} | {'yes' if r['identical_outputs'] else 'no'} |")
    return "\n".join(lines) + "\n"


# blocks that a benchmark renders itself from its saved JSON: key -> benchmarks/<name>.py / .json
BENCHMARK_BLOCKS = {"guard-served": "serving_guard", "lean-verify-curve": "lean_verify_curve",
                    "lean-decoding": "lean_decoding"}


def benchmark_rendered(name: str) -> str:
    """A block the benchmark ``benchmarks/NAME.py`` renders itself (``render_markdown``) from its saved JSON."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render_markdown(json.loads((ROOT / "benchmarks" / f"{name}.json").read_text()))


def dspark_headline(b: dict, served: dict) -> str:
    """One line for the README: DSpark (Algorithm 1) on SmolLM2 against `generate`, and served."""
    t = b["targets"]["smollm2"]
    parts = []
    for temp, rows in t["batch_size_1"].items():
        name = next(n for n in rows if n.startswith("DSpark Markov + Alg. 1"))
        r = rows[name]
        best = max((n for n in rows if n != name), key=lambda n: rows[n]["tokens_per_s"])
        ci = r["speedup_per_prompt_ci95"]
        vs = "".join(f", {_ratio_ci(r[k])}× {r[k]['peer']}" for k in ("speedup_vs_plain_same_engine",
                                                                      "speedup_vs_llama_cpp") if k in r)
        parts.append(f"{r['speedup_per_prompt_mean']:.2f}× `generate` [{ci[0]:.2f}, {ci[1]:.2f}]{vs} at {temp} "
                     f"(τ {r['tau']:.2f}; fastest other decoder: {best}, {rows[best]['speedup_vs_generate']:.2f}×)")
    users = ", ".join(f"{_ratio_ci({'mean': r['per_user_speedup'], 'ci95': r.get('per_user_speedup_ci95')})}× "
                      f"with {p.split()[0]}" for p, r in served["results"].items())
    runs = f"{served['repeats']} repeats each" if served.get("repeats", 1) > 1 else "one run each"
    # a served run saved before the server had engines ran the HF engine
    runs += f", {served.get('engine', 'HF')} engine" if served.get("engine") != "default" else ", its default engine"
    return ("DSpark on SmolLM2-135M-Instruct with its trained drafter, batch 1, this 2-core CPU: "
            + "; ".join(parts) + f". Served by `divelab serve`, per-user speed against the same server without "
            f"speculation (closed-loop users, {runs}): {users} users.\n")


def _not_counted_text(reps: list, shifted: dict[str, set[str]]) -> str:
    """Why the positives that are not counted are not: a missing falsifier, control or replication unit, or a
    verdict that moved on other CPU kernels."""
    by_rep = {r.system: r for r in reps}
    n_moved = sum(1 for key, statements in shifted.items() for c in by_rep[key].claims
                  if c.statement in statements and not c.audit_gaps())
    n_gaps = sum(1 for r in reps for c in r.claims if c.audit_gaps())
    parts = ([f"{n_gaps} {'lacks' if n_gaps == 1 else 'lack'} one of the three"] if n_gaps else []) + (
        [f"{n_moved} moved when {'its run was' if n_moved == 1 else 'their runs were'} repeated on other CPU "
         "kernels (`docs/results/stability.json`)"] if n_moved else [])
    return " and ".join(parts)


def _verdict_sentence(reps: list, what: str) -> str:
    shifted = moved(reps)
    tally = tallies_by_kind(reps, shifted)
    e = tally["empirical"]
    others = ", ".join(f"{sum(tally[k].values())} {k}" for k in tally if k != "empirical")
    earlier = sorted(r.system for r in reps if r.rules_version < RULES_VERSION)
    before = (f" {len(earlier)} of these {len(reps)} results were judged under the earlier rules, before falsifiers "
              f"and negative controls were recorded ({', '.join(earlier)}): none of their positive verdicts counts "
              "until the system is re-run." if earlier else "")
    return (f"Of **{sum(e.values())} empirical claims** {what}: "
            f"**{e['reproduced']} reproduced** (direction and size), {e['direction holds']} in direction "
            f"where the paper gives no size, {e['direction only']} in direction with a different size — each of "
            f"these with its falsifier, a negative control that did not show the effect and its replication unit, and the "
            f"same verdict wherever its run was repeated on other CPU kernels; "
            f"**{e[NOT_COUNTED]} positive {'verdict is' if e[NOT_COUNTED] == 1 else 'verdicts are'} not counted**"
            + (f" ({_not_counted_text(reps, shifted)})" if e[NOT_COUNTED] else "") + "; "
            f"{e['not separated from noise']} not separated from noise, {e['not reproduced']} not reproduced, "
            f"{e['uninformative']} uninformative, {e['not checkable here']} not checkable here. "
            f"Listed apart, never counted: {others}.{before}")


def headline(quick: list, full: list | None = None) -> str:
    """The first-screen sentences: what the empirical claims came to at full scale (the canonical record),
    then in the quick demo runs; the other kinds apart."""
    demo = _verdict_sentence(quick, f"in the quick demo runs of {len(quick)} systems")
    if not full:
        return f"No full-scale run is saved yet. {demo}\n"
    names = ", ".join(sorted(r.system for r in full))
    missing = len(quick) - len(full)
    scope = (f"in the saved full-scale runs of all {len(full)} systems" if missing <= 0 else
             f"in the saved full-scale runs of {len(full)} of {len(quick)} systems ({names}; the others are not "
             "run at full scale yet)")
    return f"{_verdict_sentence(full, scope)}\n\n{demo}\n"


def full_tally(full: dict) -> str:
    """The tally of the saved full-scale runs (the canonical record), or what is missing."""
    if not full:
        return ("No full-scale run is saved yet: the tables above come from the quick runs, a demo. "
                "`divelab reproduce SYSTEM --scale full` runs one system at full scale.\n")
    return render_block("tally", full, full)


def real_llm(full: dict) -> str:
    """Every saved full-scale claim measured on the real LLM: paper, ours, verdict and the command."""
    rows = [(key, c) for key, rep in sorted(full.items()) for c in rep.claims if "smollm2" in c.statement.lower()]
    if not rows:
        return ("No full-scale run with SmolLM2 is saved yet; each system's SmolLM2 part runs with "
                "`divelab reproduce SYSTEM --scale full` and its claims appear here.\n")
    # the model's task competence in the same run sits beside every claim: a claim about an agent that
    # cannot act says little, and the reader should not have to open the notes to see that
    competence = {key: competence_text(key, full[key]) for key in {k for k, _ in rows}}
    lines = ["| System | Claim | Paper | Ours (SmolLM2) | Verdict | SmolLM2's task competence (same run) | Command |",
             "|---|---|---|---|---|---|---|"]
    for key, c in rows:
        lines.append(f"| {key} | {_cell(c.statement)} | {_cell(c.paper_value)} | {_cell(c.measured_text())} | "
                     f"**{c.verdict.value}** | {_cell(competence[key])} | `divelab reproduce {key} --scale full` |")
    return "\n".join(lines) + "\n"


def public_claims(full: dict) -> str:
    """Every saved full-scale claim measured on a public substrate (games or data no one here wrote), beside the
    same comparison on the system's home-grown substrate where it has one, with the command."""
    rows = [(key, c, h) for key, rep in sorted(full.items()) for c, h in public.pairs(rep.claims)]
    if not rows:
        return ("No saved full-scale run holds a claim measured on public games or data yet. At scale full, InfoTree "
                "and G2PO also train on TextWorldExpress's coin collector; once their full runs are saved, those "
                "claims appear here.\n")
    lines = ["| System | Claim on public games or data | Paper | Ours | Verdict | Same comparison on our own games | "
             "Command |", "|---|---|---|---|---|---|---|"]
    for key, c, h in rows:
        own = "—" if h is None else f"{_cell(h.measured_text())}: **{h.verdict.value}**"
        lines.append(f"| {key} | {_cell(c.statement)} | {_cell(c.paper_value)} | {_cell(c.measured_text())} | "
                     f"**{c.verdict.value}** | {own} | `divelab reproduce {key} --scale full` |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def full_block(key: str, full: dict) -> str:
    """A system's full-scale table beside its quick one, with the run's time."""
    if key not in full:
        return (f"Not run at full scale yet. `divelab reproduce {key} --scale full` runs it; the saved result will "
                f"appear here beside the quick one.\n")
    return render_block(key, full, full)


def resumed_note(rep) -> str:
    """What a run that loaded cached stages resumed (its runtime is this process's only), or ''."""
    resumed = rep.details.get("resumed")
    return (f"resumed {resumed['stages_loaded']} of {resumed['of_stages']} stages from the cache, which took "
            f"{resumed['loaded_stage_seconds']:.0f} s of stage time when they were computed" if resumed else "")


def where(check: dict) -> str:
    """The kernels and, when it is not the saved run's CPU, the machine a check ran on: "AVX2", "AVX512 on AMD EPYC",
    or, when both CPUs report the same model name, "AVX2 on AMD EPYC (OpenBLAS core Haswell)"."""
    cpu, saved_cpu = check.get("cpu_model"), check.get("saved_cpu_model")
    if cpu and saved_cpu and cpu != saved_cpu:
        return f"{check['isa']} on {cpu}"
    core, saved_core = _blas_core(check.get("numpy_blas")), _blas_core(check.get("saved_numpy_blas"))
    if cpu and core and saved_core and core != saved_core:
        return f"{check['isa']} on {cpu} (OpenBLAS core {core})"
    return check["isa"]


def _blas_core(blas: str | None) -> str:
    """The CPU core OpenBLAS detected ("openblas 0.3.30 core Haswell" -> "Haswell"); "" when not recorded."""
    return blas.rsplit(" core ", 1)[1].strip() if blas and " core " in blas else ""


def stability(report: dict, systems: int, saved: dict[tuple[str, str], str | None]) -> str:
    """What the cross-ISA comparison (docs/results/stability.json) found, per scale: verdicts held, values
    identical, and the systems whose verdicts moved. Only comparisons made against the run saved now count
    (``saved``: the commit of each saved ``(scale, system)`` run)."""
    lines = []
    for scale in ("quick", "full"):
        every = [r for r in report["runs"] if r["scale"] == scale]
        # a comparison counts only against the run saved now: a system re-saved since needs a new check
        runs = [r for r in every if saved.get((scale, r["system"])) and r["saved_commit"] == saved[scale, r["system"]]]
        stale = sorted({r["system"] for r in every} - {r["system"] for r in runs})
        stale_text = (f" Re-saved since their last check, not yet re-checked: {', '.join(stale)}." if stale else "")
        if not runs:
            lines.append(f"- {scale}: not yet checked against the runs saved now.{stale_text}")
            continue
        # one line per kind of check (another ISA here, another machine): each is its own evidence
        for check in sorted({where(r) for r in runs}):
            group = [r for r in runs if where(r) == check]
            n = sum(r["summary"]["claims"] for r in group)
            held = sum(r["summary"]["same_verdict"] for r in group)
            same = sum(r["summary"]["same_value"] for r in group)
            saved_isas = " and ".join(sorted({r["saved_isa"] for r in group}))
            moved = [f"{r['system']} ({r['summary']['claims'] - r['summary']['same_verdict']} of "
                     f"{r['summary']['claims']} claims)" for r in group
                     if r["summary"]["same_verdict"] < r["summary"]["claims"]]
            lines.append(f"- {scale}: {len(group)} of {systems} systems re-run under {check} against their saved "
                         f"{saved_isas} runs: {held} of {n} verdicts held, {same} values identical. "
                         + (f"Verdicts moved in {', '.join(moved)}." if moved else "No verdict moved.") + stale_text)
            stale_text = ""
    return "\n".join(lines) + "\n"


def render_block(key: str, reps: dict, full: dict) -> str:
    """The body of block ``key``, from the saved quick runs ``reps`` and full runs ``full`` (each loaded once)."""
    if key == "tally":
        tally = tallies_by_kind(list(reps.values()), moved(list(reps.values())))
        verdict_names = list(next(iter(tally.values())))
        lines = ["| Kind of claim | " + " | ".join(verdict_names) + " |", "|---" * (len(verdict_names) + 1) + "|"]
        for kind, counts in tally.items():
            lines.append(f"| {kind} | " + " | ".join(str(n) for n in counts.values()) + " |")
        systems = ", ".join(sorted(reps))
        scales = "/".join(sorted({r.scale for r in reps.values()}))
        return "\n".join(lines) + f"\n\nFrom the saved {scales} runs of: {systems}.\n"
    if key == "serving-before-after":
        return serving_before_after(json.loads((ROOT / "benchmarks" / "serving_before_after.json").read_text()))
    if key == "scaleout":
        return scaleout(json.loads((ROOT / "benchmarks" / "scaleout.json").read_text()))
    if key == "dspark-speed":
        return dspark_speed(json.loads((ROOT / "benchmarks" / "serving_dspark.json").read_text()))
    if key == "dspark-headline":
        return dspark_headline(json.loads((ROOT / "benchmarks" / "serving_dspark.json").read_text()),
                               json.loads((ROOT / "benchmarks" / "serving_load_smollm2.json").read_text()))
    if key == "dspark-served":
        return dspark_served(json.loads((ROOT / "benchmarks" / "serving_load_smollm2.json").read_text()))
    if key in BENCHMARK_BLOCKS:
        return benchmark_rendered(BENCHMARK_BLOCKS[key])
    if key == "headline":
        return headline(list(reps.values()), list(full.values()))
    if key == "stability":
        # the saved runs are already loaded for every block: their commits, not a second read of the files
        saved = {(scale, k): rep.environment.get("commit")
                 for scale, runs in (("quick", reps), ("full", full)) for k, rep in runs.items()}
        return stability(json.loads(STABILITY.read_text()), len(reps), saved)
    if key == "full-tally":
        return full_tally(full)
    if key == "real-llm":
        return real_llm(full)
    if key == "public":
        return public_claims(full)
    if key.startswith("full-"):
        return full_block(key.removeprefix("full-"), full)
    if key == "runtime":
        total = sum(r.runtime_s for r in reps.values())
        slow = sorted(reps.values(), key=lambda r: -r.runtime_s)[:3]
        return (f"{total:.0f} s ({total / 60:.0f} minutes) for the {len(reps)} saved systems; the slowest: "
                + ", ".join(f"{r.system} {r.runtime_s:.0f} s" for r in slow) + "\n")
    if key not in reps:
        raise SystemExit(f"README has a results block for {key!r} but docs/results/{key}.json does not exist")
    rep = reps[key]
    resumed = resumed_note(rep)
    resumed_text = f"; this run {resumed}" if resumed else ""
    head = (f"Measured with `divelab reproduce {key} --scale {rep.scale} --seed {rep.seed}` "
            f"({rep.runtime_s:.0f} s on {rep.environment.get('cpus', '?')} CPUs, {rep.environment.get('device', 'cpu')}"
            f"{resumed_text}).\n\n")
    side = public.side_by_side_md(rep.claims)
    side_text = ("\n\nThe claims measured on public games or data, each beside the same comparison on our own games:\n\n"
                 + "\n".join(side) if side else "")
    return head + "\n".join(claims_table_md(rep.claims, key, isa_notes(rep))) + side_text + "\n"


def isa_notes(rep) -> dict[str, str]:
    """Per claim, whether its verdict held when the run was repeated under another kernel ISA ({} if not checked);
    a positive whose verdict moved also says it is not counted."""
    notes: dict[str, str] = {}
    saved_checks = checks.load_checks(STABILITY)
    for e in checks.checks_of(rep, saved_checks):
        for row in e["claims"]:
            held = (f"verdict held under {where(e)}" if row["same_verdict"] else
                    f"verdict moved under {where(e)}: {row['verdict'] or 'claim missing'}")
            notes[row["statement"]] = "; ".join(x for x in (notes.get(row["statement"]), held) if x)
    for statement in checks.moved([rep], saved_checks).get(rep.system, ()):
        notes[statement] += f"; {checks.MOVED_NOTE}"
    return notes


def moved(reps: list) -> dict[str, set[str]]:
    """Per system, the positives of these saved runs whose verdict moved in a check of that very run."""
    return checks.moved(reps, checks.load_checks(STABILITY))


def rendered(text: str, reps: dict | None = None, full: dict | None = None) -> str:
    """``text`` with every generated block re-rendered (the saved runs are read here unless passed in)."""
    reps = _reps() if reps is None else reps
    full = _reps(FULL) if full is None else full
    return BLOCK.sub(lambda m: m.group(1) + render_block(m.group("key"), reps, full) + m.group(4), text)


def pages() -> list[Path]:
    """README.md and every documentation page: all may hold generated blocks."""
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("save", "write", "check"):
        print(__doc__)
        return 2
    if argv[0] == "save":
        if len(argv) != 2:
            print("usage: readme_results.py save RUN_DIR")
            return 2
        for p in save(argv[1]):
            print(f"saved {p.relative_to(ROOT)}")
        return 0
    stale = []
    reps, full = _reps(), _reps(FULL)  # read the saved runs once for every page
    for page in pages():
        text = page.read_text()
        new = rendered(text, reps, full)
        if new != text:
            stale.append(page.relative_to(ROOT))
            if argv[0] == "write":
                page.write_text(new)
    if argv[0] == "check" and stale:
        print(f"measured tables differ from docs/results/*.json in: {', '.join(map(str, stale))}; "
              "run tools/readme_results.py write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
