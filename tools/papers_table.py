"""Print the README's papers table from the registry (status is derived from the code).

    .venv/bin/python tools/papers_table.py
"""

from pathlib import Path

from divelab import registry

DOCS = Path(__file__).resolve().parents[1] / "docs" / "systems"


def main() -> None:
    print("| E | System | arXiv | Package | Status | Run it |")
    print("|---|---|---|---|---|---|")
    for s in registry.SYSTEMS:
        run = f"`divelab reproduce {s.key}`" if s.implemented else "—"
        name = f"[{s.name}](docs/systems/{s.key}.md)" if (DOCS / f"{s.key}.md").exists() else s.name
        print(f"| E{s.e_number} | {name} | {s.arxiv} | `{s.module}` | {s.status} | {run} |")


if __name__ == "__main__":
    main()
