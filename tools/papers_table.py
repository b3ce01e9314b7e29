"""Print the README's papers table from the registry (status is derived from the code).

    .venv/bin/python tools/papers_table.py
"""

from divelab import registry


def main() -> None:
    print("| E | System | arXiv | Package | Status | Run it |")
    print("|---|---|---|---|---|---|")
    for s in registry.SYSTEMS:
        run = f"`divelab reproduce {s.key}`" if s.implemented else "—"
        print(f"| E{s.e_number} | {s.name} | {s.arxiv} | `{s.module}` | {s.status} | {run} |")


if __name__ == "__main__":
    main()
