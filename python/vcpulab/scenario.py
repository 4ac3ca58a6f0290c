"""Scenario inputs: a path, TOML text or a dict, and `--set key=value` overrides.

Python does not interpret scenarios: it only turns what the user gave into TOML text
for the core, which validates it and fills the defaults.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from vcpulab.errors import ScenarioError, UsageError

ScenarioInput: TypeAlias = "str | os.PathLike[str] | Mapping[str, Any]"

#: Largest trace file a scenario may read (bytes).
MAX_TRACE_BYTES = 64 * 1024 * 1024
#: Largest scenario file (bytes).
MAX_SCENARIO_BYTES = 16 * 1024 * 1024

_KEY_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_\-]+$")


def load_scenario(scenario: ScenarioInput, *, allow_paths: bool = False) -> str:
    """Return the TOML text of `scenario`.

    A `Path` (or a string naming an existing file, or a one-line string ending in
    `.toml`) is read from disk; a mapping is serialised to TOML; any other string is
    taken as TOML text. A trace workload's `params.file` is read relative to the
    scenario file's folder, or to the working directory for TOML text and mappings.
    """
    if isinstance(scenario, Mapping):
        # A trace workload's `params.file` is relative to the working directory here.
        return inline_trace_files(dumps_toml(scenario), Path.cwd(), allow_paths=allow_paths)
    if isinstance(scenario, os.PathLike):
        return _read(Path(scenario), allow_paths)
    if not isinstance(scenario, str):
        raise ScenarioError(
            f"scenario must be a path, TOML text or a dict, not {type(scenario).__name__}"
        )
    if "\x00" in scenario and "\n" not in scenario:
        raise ScenarioError("the scenario path contains a NUL byte")
    if "\n" not in scenario and "=" not in scenario:
        # A single line without '=' cannot be a useful TOML document: it names a file.
        return _read(Path(scenario), allow_paths)
    if "\n" not in scenario and scenario.endswith(".toml") and Path(scenario).exists():
        return _read(Path(scenario), allow_paths)
    return inline_trace_files(scenario, Path.cwd(), allow_paths=allow_paths)


def _read(path: Path, allow_paths: bool = False) -> str:
    return inline_trace_files(_read_text(path), path.parent, allow_paths=allow_paths)


def inline_trace_files(text: str, base: Path, *, allow_paths: bool = False) -> str:
    """Replace `params.file` of every `trace` workload by the file's text (`params.text`).

    The core does no file I/O; the resolved scenario then carries the trace itself, so
    its hash (the results store's key) changes with the trace's content. Relative paths
    are taken from `base`, the scenario file's folder; absolute paths and paths that
    leave that folder (`..`) are refused unless `allow_paths`. Only regular files of at
    most `MAX_TRACE_BYTES` are read, and errors never quote the file's content.
    """
    if "file" not in text:
        return text
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text  # the core reports the syntax error with its position
    except RecursionError:
        raise ScenarioError("invalid TOML: arrays or tables nested too deeply") from None
    vms = data.get("vm")
    if not isinstance(vms, list):
        return text
    changed = False
    for i, vm in enumerate(vms):
        workload = vm.get("workload") if isinstance(vm, dict) else None
        if not isinstance(workload, dict):
            continue
        params = workload.get("params")
        if not isinstance(params, dict) or "file" not in params:
            continue
        key = f"vm.{i}.workload.params.file"
        if workload.get("model") != "trace":
            raise ScenarioError(f"{key}: only the trace model reads a file")
        if "text" in params:
            raise ScenarioError(f"{key}: give the trace either inline (text) or as a file")
        name = params.pop("file")
        if not isinstance(name, str):
            raise ScenarioError(f"{key}: {name!r} is not allowed; expected a path string")
        params["text"] = _read_trace(key, name, base, allow_paths)
        changed = True
    return dumps_toml(data) if changed else text


def _read_trace(key: str, name: str, base: Path, allow_paths: bool) -> str:
    if "\x00" in name:
        raise ScenarioError(f"{key}: the path contains a NUL byte")
    rel = Path(name)
    if not allow_paths and (rel.is_absolute() or ".." in rel.parts):
        raise ScenarioError(
            f"{key}: {name!r} is not allowed; expected a path inside the scenario's folder "
            "(the working directory for TOML text or a dict; absolute and '..' paths need "
            "--allow-paths)"
        )
    path = rel if rel.is_absolute() else base / rel
    try:
        st = path.stat()
    except OSError as exc:
        raise ScenarioError(f"{key}: cannot read {str(path)!r} ({exc.strerror})") from None
    import stat as _stat

    if not _stat.S_ISREG(st.st_mode):
        raise ScenarioError(f"{key}: {str(path)!r} is not a regular file")
    if st.st_size > MAX_TRACE_BYTES:
        raise ScenarioError(
            f"{key}: {str(path)!r} has {st.st_size} bytes; expected at most {MAX_TRACE_BYTES}"
        )
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(f"{key}: cannot read {str(path)!r} ({exc.strerror})") from None
    if len(data) > MAX_TRACE_BYTES:
        raise ScenarioError(f"{key}: {str(path)!r} exceeds {MAX_TRACE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{key}: {str(path)!r} is not UTF-8 text") from None


def _read_text(path: Path) -> str:
    if "\x00" in str(path):
        raise ScenarioError("the scenario path contains a NUL byte")
    try:
        if path.exists() and not path.is_dir() and not path.is_file():
            raise ScenarioError(f"scenario path {path} is not a regular file")
        if path.is_file() and path.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioError(f"scenario file {path} is larger than {MAX_SCENARIO_BYTES} bytes")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"no such scenario file: {path}") from None
    except IsADirectoryError:
        raise FileNotFoundError(f"scenario path is a directory, not a file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"scenario file {path} is not UTF-8 text ({exc.reason})") from None
    except PermissionError:
        raise ScenarioError(f"cannot read scenario file {path}: permission denied") from None


def check_override(item: str) -> str:
    """Validate the syntax of one `dotted.key=value` override and return it unchanged."""
    if "=" not in item:
        raise UsageError(f"bad --set {item!r}: expected dotted.key=value")
    key, value = item.split("=", 1)
    key = key.strip()
    if not _KEY_RE.match(key):
        raise UsageError(
            f"bad --set {item!r}: key {key!r} must be dotted names of letters, digits, '_' or '-'"
        )
    if value.strip() == "":
        raise UsageError(f"bad --set {item!r}: empty value for key {key!r}")
    return f"{key}={value.strip()}"


def normalize_overrides(overrides: Iterable[str] | Mapping[str, Any] | None) -> list[str]:
    """Accept `["a.b=1", ...]` or `{"a.b": 1}` and return validated `key=value` strings."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        items = [f"{k}={format_value(v)}" for k, v in overrides.items()]
    elif isinstance(overrides, str):
        items = [overrides]
    else:
        items = list(overrides)
    return [check_override(i) for i in items]


def format_value(value: Any) -> str:
    """Render a Python value the way a user would type it after `--set key=`."""
    value = _plain(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(f"{value} is not allowed as a value; expected a finite number")
    if not isinstance(value, str | int | float | bool):
        raise ScenarioError(
            f"a {type(value).__name__} value is not allowed; expected a string, number or boolean"
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return str(value)


def parse_value(text: str) -> Any:
    """Best-effort typed value of a grid value string (for DataFrame columns)."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


# --- a small TOML emitter (enough for scenario dicts) -------------------------------------


def dumps_toml(data: Mapping[str, Any]) -> str:
    """Serialise a mapping to TOML text with a real TOML writer (tomli-w).

    numpy scalars and arrays become Python numbers and lists; None values are left out
    (TOML has no null: a missing key means "use the default"). A value TOML cannot hold
    raises ScenarioError.
    """
    import tomli_w

    try:
        return tomli_w.dumps(_plain_tree(data, ""))
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"cannot write the scenario as TOML: {exc}") from None


def _plain_tree(value: Any, key: str) -> Any:
    value = _plain(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ScenarioError(f"scenario keys must be strings, got {type(k).__name__}")
            if v is None:
                continue
            out[k] = _plain_tree(v, f"{key}.{k}" if key else k)
        return out
    if isinstance(value, list | tuple):
        return [_plain_tree(v, key) for v in value if v is not None]
    if isinstance(value, bool | int | float | str | _dt.datetime | _dt.date | _dt.time):
        return value
    raise ScenarioError(
        f"{key or 'scenario'}: a {type(value).__name__} value cannot be written as TOML; "
        "expected a string, number, boolean, date, list or table"
    )


def _emit_table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    scalars: list[tuple[str, Any]] = []
    subtables: list[tuple[str, Mapping[str, Any]]] = []
    arrays_of_tables: list[tuple[str, Sequence[Mapping[str, Any]]]] = []
    for key, value in table.items():
        if not isinstance(key, str):
            raise ScenarioError(f"scenario keys must be strings, got {type(key).__name__}")
        value = _plain(value)
        if value is None:
            continue  # TOML has no null: leaving the key out means "use the default"
        if isinstance(value, Mapping):
            subtables.append((key, value))
        elif _is_array_of_tables(value):
            arrays_of_tables.append((key, value))
        else:
            scalars.append((key, value))
    for key, value in scalars:
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, sub in subtables:
        sub_path = [*path, key]
        if any(not isinstance(v, Mapping) and not _is_array_of_tables(v) for v in sub.values()) or (
            not sub
        ):
            lines.append("")
            lines.append(f"[{'.'.join(_key(k) for k in sub_path)}]")
        _emit_table(lines, sub_path, sub)
    for key, items in arrays_of_tables:
        sub_path = [*path, key]
        for item in items:
            lines.append("")
            lines.append(f"[[{'.'.join(_key(k) for k in sub_path)}]]")
            _emit_table(lines, sub_path, item)


def _is_array_of_tables(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(v, Mapping) for v in value)
    )


def _key(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else _string(key)


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (anything with `.tolist()`/`.item()`) as Python values."""
    mod = type(value).__module__
    if mod == "numpy" or mod.startswith("numpy."):
        tolist = getattr(value, "tolist", None)
        if callable(tolist):
            return tolist()
    return value


def _value(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise ScenarioError(
        f"cannot write a {type(value).__name__} value as TOML; expected a string, "
        "number, boolean, date, list or table"
    )
