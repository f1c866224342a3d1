"""Which speculative-config keys and methods each vLLM release accepts, read from the source of
its wheel (downloaded once by hand, never at run time), without importing it:

    pip download --no-deps --only-binary=:all: vllm==0.34.0 -d /tmp/wheels
    python scripts/vllm_spec_keys.py /tmp/wheels/vllm-0.26.0-*.whl /tmp/wheels/vllm-0.34.0-*.whl ... \
        > tests/data/vllm-spec-keys.json
    python scripts/vllm_spec_keys.py --table tests/data/vllm-spec-keys.json   # the docs table

`SpeculativeMethod` (a Literal, or a union of Literal aliases) gives the methods; the annotated
fields of `SpeculativeConfig` the keys; `ObservabilityConfig` whether per-request acceptance
(`--per-request-spec-decode-metrics`) exists. tests/unit/test_vllm_versions.py reads the JSON.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path


def _literal_values(node: ast.AST, aliases: dict[str, ast.AST]) -> list[str]:
    if isinstance(node, ast.BinOp):  # A | B
        return _literal_values(node.left, aliases) + _literal_values(node.right, aliases)
    if isinstance(node, ast.Name) and node.id in aliases:
        return _literal_values(aliases[node.id], aliases)
    if isinstance(node, ast.Subscript):
        name = getattr(node.value, "id", getattr(node.value, "attr", ""))
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if name == "Literal":  # its items: strings, or aliases of other Literals
            return [v for i in items for v in ([i.value] if isinstance(i, ast.Constant) and isinstance(i.value, str)
                                               else _literal_values(i, aliases))]
        if name in ("Union", "Optional"):
            return [v for i in items for v in _literal_values(i, aliases)]
    return []


def class_fields(tree: ast.Module, name: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return sorted(s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                          and isinstance(s.target, ast.Name) and "ClassVar" not in ast.unparse(s.annotation)
                          and not s.target.id.startswith("_"))
    return []


def keys_of(speculative: str, observability: str) -> dict:
    tree = ast.parse(speculative)
    aliases = {n.targets[0].id: n.value for n in tree.body
               if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    aliases |= {n.target.id: n.value for n in tree.body if isinstance(n, ast.AnnAssign)
                and isinstance(n.target, ast.Name) and n.value is not None}
    methods = sorted(set(_literal_values(aliases["SpeculativeMethod"], aliases)))
    return {"methods": methods, "fields": class_fields(tree, "SpeculativeConfig"),
            "per_request_spec_decode_metrics": "per_request_spec_decode_metrics" in
            class_fields(ast.parse(observability), "ObservabilityConfig")}


def from_wheel(path: Path) -> tuple[str, dict]:
    version = re.match(r"vllm-([^-]+)-", path.name).group(1)
    with zipfile.ZipFile(path) as wheel:
        read = lambda name: wheel.read(name).decode()  # noqa: E731
        return version, keys_of(read("vllm/config/speculative.py"), read("vllm/config/observability.py"))


def table(recorded: dict) -> str:
    versions = sorted(recorded, key=lambda v: tuple(int(x) for x in v.split(".")))
    lines = [f"| | {' | '.join(versions)} |", "| --- |" + " --- |" * len(versions)]
    for kind in ("methods", "fields"):
        for key in sorted({k for v in versions for k in recorded[v][kind]}):
            lines.append(f"| {'method' if kind == 'methods' else 'key'} `{key}` | "
                         + " | ".join("yes" if key in recorded[v][kind] else "-" for v in versions) + " |")
    lines.append("| `--per-request-spec-decode-metrics` | "
                 + " | ".join("yes" if recorded[v]["per_request_spec_decode_metrics"] else "-" for v in versions) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--table"]:
        sys.stdout.write(table(json.loads(Path(sys.argv[2]).read_text())))
    else:
        print(json.dumps(dict(from_wheel(Path(p)) for p in sys.argv[1:]), indent=1, sort_keys=True))
