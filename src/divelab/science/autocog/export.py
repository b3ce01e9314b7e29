"""Export a design as a runnable browser experiment (one self-contained HTML file, plain JS).

The page follows the task protocol: instructions, then every pair ``repeats`` times in a random
order (seeded per participant), sides counterbalanced, expert validities shown, keys F (left) and
J (right) locked for ``min_rt_ms`` after each onset, no feedback. At the end the per-trial data
(pair, side, ratings, response, RT) are shown as JSON in ``<pre id="autocog-data">``, kept in
``window.autocogData`` and offered as a download — the same fields :class:`~.simulate.Data`
holds, so real responses can be scored by the loop. ``?auto=1`` answers by itself (take-the-best
after the key lock), for headless smoke tests; ``?pid=NAME`` seeds the trial order.

The core (trial list, auto-responder, a headless session) runs without a DOM, so it can be
tested with Node as well as in a browser.
"""

from __future__ import annotations

import json
from pathlib import Path

from divelab.cache import atomic_write_text
from divelab.science.autocog.task import Design

_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font-family:system-ui,sans-serif;max-width:760px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em auto}td,th{border:1px solid #999;padding:.4em .9em;text-align:center}
.locked{opacity:.5}.key{font-weight:bold}#status{color:#666;text-align:center}
</style></head>
<body>
<div id="app"><p>Loading…</p></div>
<pre id="autocog-data" hidden></pre>
<script id="autocog-config" type="application/json">__CONFIG__</script>
<script>
"use strict";
const AutoCog = (function () {
  function mulberry32(a) { return function () { a |= 0; a = a + 0x6D2B79F5 | 0; let t = Math.imul(a ^ a >>> 15, 1 | a);
    t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t; return ((t ^ t >>> 14) >>> 0) / 4294967296; }; }
  function hashString(s) { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619); } return h >>> 0; }
  function makeTrials(cfg, pid) {
    const rand = mulberry32(hashString(String(pid)) ^ cfg.seed);
    const list = [];
    cfg.pairs.forEach(function (p, k) { for (let r = 0; r < cfg.repeats; r++) list.push(k); });
    for (let i = list.length - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1));
      const t = list[i]; list[i] = list[j]; list[j] = t; }
    return list.map(function (k, t) { const swapped = rand() < 0.5; const a = cfg.pairs[k][0], b = cfg.pairs[k][1];
      return {trial: t, pair: k, swapped: swapped, left: swapped ? b : a, right: swapped ? a : b}; });
  }
  function takeTheBest(cfg, trial) {  // the auto-responder: first discriminating cue by validity
    const order = cfg.validities.map(function (v, i) { return [v, i]; })
      .sort(function (x, y) { return y[0] - x[0] || x[1] - y[1]; }).map(function (x) { return x[1]; });
    for (const i of order) { if (trial.left[i] !== trial.right[i]) return trial.left[i] > trial.right[i] ? "left" : "right"; }
    return "left";
  }
  function record(trial, response, rt) {
    return {trial: trial.trial, pair: trial.pair, swapped: trial.swapped, left: trial.left, right: trial.right,
            response: response, chose_left: response === "left", chose_a: (response === "left") !== trial.swapped, rt: rt};
  }
  function runHeadless(cfg, pid) {  // a whole session without a DOM (auto-responder, RT = the key lock)
    return makeTrials(cfg, pid).map(function (t) { return record(t, takeTheBest(cfg, t), cfg.min_rt_ms); });
  }
  return {makeTrials: makeTrials, takeTheBest: takeTheBest, record: record, runHeadless: runHeadless};
})();
if (typeof module !== "undefined") { module.exports = AutoCog; }

if (typeof document !== "undefined") {
  const cfg = JSON.parse(document.getElementById("autocog-config").textContent);
  const params = new URLSearchParams(window.location.search);
  const auto = params.get("auto") === "1";
  const pid = params.get("pid") || String(Date.now());
  const trials = AutoCog.makeTrials(cfg, pid);
  const data = [];
  const app = document.getElementById("app");
  let t = 0, onset = 0, locked = true;
  function ratingsTable(trial) {
    let rows = "<tr><th>Expert</th><th>Validity</th><th>Product left</th><th>Product right</th></tr>";
    cfg.validities.forEach(function (v, i) { rows += "<tr><td>" + (i + 1) + "</td><td>" + Math.round(v * 100) +
      "%</td><td>" + trial.left[i] + "</td><td>" + trial.right[i] + "</td></tr>"; });
    return "<table id='ratings'>" + rows + "</table>";
  }
  function show() {
    if (t >= trials.length) { finish(); return; }
    const trial = trials[t];
    app.innerHTML = "<p id='status'>Trial " + (t + 1) + " of " + trials.length + "</p>" + ratingsTable(trial) +
      "<p style='text-align:center' class='locked' id='keys'>Press <span class='key'>F</span> for left, " +
      "<span class='key'>J</span> for right</p>";
    onset = performance.now(); locked = true;
    setTimeout(function () { locked = false; const k = document.getElementById("keys"); if (k) k.className = "";
      if (auto) respond(AutoCog.takeTheBest(cfg, trial)); }, cfg.min_rt_ms);
  }
  function respond(side) {
    if (locked || t >= trials.length) return;
    locked = true;
    data.push(AutoCog.record(trials[t], side, Math.round(performance.now() - onset)));
    t += 1; setTimeout(show, cfg.iti_ms);
  }
  function finish() {
    const out = {experiment: cfg.title, pid: pid, trials: data};
    window.autocogData = out;
    const pre = document.getElementById("autocog-data");
    pre.textContent = JSON.stringify(out); pre.hidden = false;
    const url = URL.createObjectURL(new Blob([JSON.stringify(out)], {type: "application/json"}));
    app.innerHTML = "<p id='done'>Done: " + data.length + " choices recorded. Thank you!</p>" +
      "<p><a download='autocog-" + pid + ".json' href='" + url + "'>Download the data</a></p>";
    document.title = "done";
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "f" || e.key === "F") respond("left"); else if (e.key === "j" || e.key === "J") respond("right");
  });
  app.innerHTML = "<p>You will choose between two products, each rated by " + cfg.validities.length +
    " experts (0 = worst, " + cfg.rating_max + " = best). The validity says how often each expert is right. " +
    "There is no feedback.</p><p>Press any key to start.</p>";
  if (auto) { setTimeout(show, 10); } else {
    document.addEventListener("keydown", function start() { document.removeEventListener("keydown", start); show(); });
  }
}
</script>
</body></html>
"""


def experiment_config(design: Design, *, title: str = "AutoCog experiment", min_rt_ms: int = 500,
                      iti_ms: int = 300, seed: int = 0) -> dict:
    return {"title": title, "validities": list(design.task.validities), "rating_max": design.task.rating_max,
            "pairs": [[list(a), list(b)] for a, b in design.pairs], "repeats": design.repeats,
            "min_rt_ms": int(min_rt_ms), "iti_ms": int(iti_ms), "seed": int(seed)}


def export_html(design: Design, path: str | Path, *, title: str = "AutoCog experiment", min_rt_ms: int = 500,
                iti_ms: int = 300, seed: int = 0) -> Path:
    """Write ``design`` as a self-contained HTML/JS experiment; returns the path."""
    if min_rt_ms < 0 or iti_ms < 0:
        raise ValueError(f"min_rt_ms and iti_ms must be >= 0, got {min_rt_ms} and {iti_ms}")
    cfg = experiment_config(design, title=title, min_rt_ms=min_rt_ms, iti_ms=iti_ms, seed=seed)
    html = (_TEMPLATE.replace("__CONFIG__", json.dumps(cfg).replace("</", "<\\/"))
            .replace("__TITLE__", title.replace("<", "&lt;").replace(">", "&gt;")))
    path = Path(path)
    atomic_write_text(path, html)
    return path
