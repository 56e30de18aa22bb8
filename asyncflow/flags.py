"""`af.flags`: TF1's `tf.flags` (absl-style command-line flags) without absl.

`DEFINE_string/integer/float/boolean/enum/list(name, default, help)` declare flags on
the global `FLAGS`; `FLAGS(argv)` parses `--name=value`, `--name value`, and for
booleans `--name` / `--noname`, and returns the arguments left over (argv[0] first).
`DEFINE_multi_string/integer/float/enum` declare flags that may be given many times:
their value is a list, the first occurrence replacing the default and later ones
appending.  `--flagfile=PATH` (or `--flagfile PATH`) is replaced by the lines of PATH
where it stands (blank lines and lines starting with `#` or `//` skipped, nested
`--flagfile` lines expanded, a file already being read ignored), so later flags win.
As TF1's wrapper does, reading an attribute of `FLAGS` before any parse parses
`sys.argv` with `known_only=True` first.

Errors (absl's classes, all subclasses of `Error`): `DuplicateFlagError` (a name defined
twice), `IllegalFlagValueError` (a value that does not parse or fails its enum),
`UnrecognizedFlagError` (an unknown `--flag` when not `known_only`),
`IllegalFlagValueError` too for a missing required flag, `CantOpenFlagFileError` (a
flag file that cannot be read).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

__all__ = [
    "FLAGS",
    "DEFINE",
    "DEFINE_bool",
    "DEFINE_boolean",
    "DEFINE_enum",
    "DEFINE_float",
    "DEFINE_integer",
    "DEFINE_list",
    "DEFINE_multi",
    "DEFINE_multi_enum",
    "DEFINE_multi_float",
    "DEFINE_multi_integer",
    "DEFINE_multi_string",
    "DEFINE_string",
    "CantOpenFlagFileError",
    "DuplicateFlagError",
    "Error",
    "Flag",
    "FlagValues",
    "IllegalFlagValueError",
    "UnparsedFlagAccessError",
    "UnrecognizedFlagError",
    "mark_flag_as_required",
    "mark_flags_as_required",
]


class Error(Exception):
    """The base class of flag errors (absl's `flags.Error`)."""


class DuplicateFlagError(Error):
    pass


class IllegalFlagValueError(Error):
    pass


class UnrecognizedFlagError(Error):
    def __init__(self, flagname, flagvalue=""):
        self.flagname, self.flagvalue = flagname, flagvalue
        super().__init__(f"Unknown command line flag '{flagname}'")


class UnparsedFlagAccessError(Error):
    pass


class CantOpenFlagFileError(Error):
    pass


_TRUE = ("true", "t", "1", "yes", "y")
_FALSE = ("false", "f", "0", "no", "n")


def _parse_bool(text) -> bool:
    if isinstance(text, bool):
        return text
    low = str(text).lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"Non-boolean argument to boolean flag: {text!r}")


def _parse_list(text) -> list:
    if isinstance(text, (list, tuple)):
        return list(text)
    return [s.strip() for s in str(text).split(",") if s.strip()] if text else []


class Flag:
    """One flag: its name, default, help, parser and current value."""

    def __init__(self, name, default, help_string, parser: Callable, flag_type: str, **extra):
        self.name = name
        self.help = help_string
        self.parser = parser
        self.flag_type = flag_type
        self.enum_values = extra.get("enum_values")
        self.case_sensitive = extra.get("case_sensitive", True)
        self.multi = extra.get("multi", False)  # a list of values, one per occurrence
        self.present = 0
        self.default = None if default is None else self._parse(default)
        self.value = self.default
        self.required = False

    def _parse_one(self, text):
        try:
            value = self.parser(text)
        except (TypeError, ValueError) as exc:
            raise IllegalFlagValueError(f"flag --{self.name}={text}: {exc}") from None
        if self.enum_values is not None:
            if not self.case_sensitive:  # the enum's own spelling, as absl
                spelled = {v.upper(): v for v in self.enum_values}
                value = spelled.get(str(value).upper(), value)
            if value not in self.enum_values:
                raise IllegalFlagValueError(
                    f"flag --{self.name}={text}: value should be one of "
                    f"<{'|'.join(self.enum_values)}>"
                )
        return value

    def _parse(self, text):
        if not self.multi:
            return self._parse_one(text)
        items = text if isinstance(text, (list, tuple)) else [text]
        return [self._parse_one(t) for t in items]

    def parse(self, text) -> None:
        value = self._parse(text)
        if self.multi and self.present:
            self.value.extend(value)
            self.present += len(value)
        else:
            self.value = value
            self.present += len(value) if self.multi else 1


def _defining_module() -> str:
    """The module defining a flag, as absl names it: the first caller outside this
    module (the script's path for __main__)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    name = "<unknown>" if frame is None else frame.f_globals.get("__name__", "<unknown>")
    return sys.argv[0] if name == "__main__" and sys.argv else name


class FlagValues:
    """A registry of flags; attribute access reads and writes their values."""

    def __init__(self):
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_parsed", False)
        object.__setattr__(self, "_auto_parse", False)

    # -- definition
    def _define(self, flag: Flag) -> Flag:
        flag.module = _defining_module()
        first = self._flags.get(flag.name)
        if first is not None:
            raise DuplicateFlagError(
                f"The flag '{flag.name}' is defined twice. First from {first.module}, second "
                f"from {flag.module}. Description from first occurrence: {first.help}"
            )
        self._flags[flag.name] = flag
        return flag

    def __contains__(self, name) -> bool:
        return name in self._flags

    def __getitem__(self, name) -> Flag:
        return self._flags[name]

    def __iter__(self):
        return iter(self._flags)

    def __len__(self) -> int:
        return len(self._flags)

    # -- values
    def __getattr__(self, name):
        flags = object.__getattribute__(self, "_flags")
        if name not in flags:
            raise AttributeError(name)
        if not self._parsed:
            if not self._auto_parse:
                raise UnparsedFlagAccessError(
                    f"Trying to access flag --{name} before flags were parsed."
                )
            self(sys.argv, known_only=True)
        return flags[name].value

    def __setattr__(self, name, value):
        if name not in self._flags:
            raise AttributeError(name)
        self._flags[name].value = value

    def __delattr__(self, name):
        if name not in self._flags:
            raise AttributeError(name)
        del self._flags[name]

    def is_parsed(self) -> bool:
        return self._parsed

    def mark_as_parsed(self) -> None:
        object.__setattr__(self, "_parsed", True)

    def unparse_flags(self) -> None:
        for flag in self._flags.values():
            flag.value, flag.present = flag.default, 0
        object.__setattr__(self, "_parsed", False)

    def flag_values_dict(self) -> dict:
        return {name: flag.value for name, flag in self._flags.items()}

    def get_flag_value(self, name, default):
        return self._flags[name].value if name in self._flags else default

    def set_default(self, name, value) -> None:
        flag = self._flags[name]
        flag.default = flag._parse(value)
        if not flag.present:
            flag.value = flag.default

    # -- parsing
    def __call__(self, argv, known_only: bool = False) -> list:
        """Parse `argv` (argv[0] is the program); the unparsed arguments, argv[0] first.

        Raises: UnrecognizedFlagError, IllegalFlagValueError.
        """
        argv = list(argv)
        rest = argv[:1]
        args = _read_flag_files(argv[1:])
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            if arg == "--":
                rest.extend(args[i:])
                break
            if not arg.startswith("-") or arg == "-":
                rest.append(arg)
                continue
            body = arg.lstrip("-")
            name, eq, value = body.partition("=")
            flag = self._flags.get(name)
            if flag is None and not eq and name.startswith("no"):
                negated = self._flags.get(name[2:])
                if negated is not None and negated.flag_type == "bool":
                    negated.parse(False)
                    continue
            if flag is None:
                if known_only:
                    rest.append(arg)
                    continue
                raise UnrecognizedFlagError(name, value)
            if not eq:
                if flag.flag_type == "bool":
                    flag.parse(True)
                    continue
                if i >= len(args):
                    raise IllegalFlagValueError(f"Flag --{name} expects a value")
                value = args[i]
                i += 1
            flag.parse(value)
        for flag in self._flags.values():
            if flag.required and flag.value is None:
                raise IllegalFlagValueError(
                    f"flag --{flag.name} must have a value other than None."
                )
        self.mark_as_parsed()
        return rest


def _is_flag_file(arg) -> bool:
    return isinstance(arg, str) and (
        arg in ("--flagfile", "-flagfile") or arg.startswith(("--flagfile=", "-flagfile="))
    )


def _read_flag_files(args: list) -> list:
    """`args` with each --flagfile directive replaced by its file's lines, in place.

    Raises: IllegalFlagValueError (--flagfile with no argument), CantOpenFlagFileError.
    """
    out: list = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out.extend(args[i - 1 :])
            break
        if not _is_flag_file(arg):
            out.append(arg)
            continue
        if "=" in arg:
            path = arg.partition("=")[2]
        elif i < len(args):
            path, i = args[i], i + 1
        else:
            raise IllegalFlagValueError("--flagfile with no argument")
        out.extend(_flag_file_lines(os.path.expanduser(path), []))
    return out


def _flag_file_lines(path: str, reading: list) -> list:
    if not path:
        return []
    if path in reading:  # a file that includes itself, directly or not
        sys.stderr.write(f"Warning: Hit circular flagfile dependency. Ignoring flagfile: {path}\n")
        return []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as exc:
        raise CantOpenFlagFileError(f"ERROR:: Unable to open flagfile: {exc}") from None
    reading.append(path)
    out = []
    for line in lines:
        if line.isspace() or line.startswith(("#", "//")):
            continue
        if _is_flag_file(line) and "=" in line:
            out.extend(
                _flag_file_lines(os.path.expanduser(line.strip().partition("=")[2]), reading)
            )
        else:
            out.append(line.strip())
    reading.pop()
    return out


class _AutoParsingFlagValues(FlagValues):
    """TF1's wrapper: the first attribute read parses sys.argv (known flags only)."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_auto_parse", True)


FLAGS = _AutoParsingFlagValues()


def DEFINE(parser, name, default, help, flag_values=FLAGS, flag_type="string", **extra):  # noqa: N802,A002
    return flag_values._define(Flag(name, default, help, parser, flag_type, **extra))


def DEFINE_string(name, default, help, flag_values=FLAGS):  # noqa: N802,A002
    return DEFINE(str, name, default, help, flag_values, "string")


def _parse_int(text) -> int:
    """absl's integers: base 10, or 16/8/2 after a 0x/0o/0b prefix."""
    if not isinstance(text, str):
        return int(text)
    base = 10
    if len(text) > 2 and text[0] == "0":
        base = {"x": 16, "o": 8, "b": 2}.get(text[1], 10)
    return int(text, base)


def _bounded(parse, lower_bound, upper_bound):
    kind = "integer" if parse is _parse_int else "number"
    if lower_bound is not None and upper_bound is not None:
        what = f"{'an' if kind == 'integer' else 'a'} {kind} in the range [{lower_bound}, "
        what += f"{upper_bound}]"
    elif lower_bound == 1:
        what = f"a positive {kind}"
    elif upper_bound == -1:
        what = f"a negative {kind}"
    elif lower_bound == 0:
        what = f"a non-negative {kind}"
    elif upper_bound == 0:
        what = f"a non-positive {kind}"
    elif upper_bound is not None:
        what = f"{kind} <= {upper_bound}"
    else:
        what = f"{kind} >= {lower_bound}"

    def parse_bounded(text):  # (absl's words: "-1 is not a non-negative integer")
        value = parse(text)
        if (lower_bound is not None and value < lower_bound) or (
            upper_bound is not None and value > upper_bound
        ):
            raise ValueError(f"{value} is not {what}")
        return value

    return parse_bounded


def DEFINE_integer(name, default, help, lower_bound=None, upper_bound=None, flag_values=FLAGS):  # noqa: N802,A002,E501
    return DEFINE(
        _bounded(_parse_int, lower_bound, upper_bound), name, default, help, flag_values, "int"
    )


def DEFINE_float(name, default, help, lower_bound=None, upper_bound=None, flag_values=FLAGS):  # noqa: N802,A002,E501
    return DEFINE(
        _bounded(float, lower_bound, upper_bound), name, default, help, flag_values, "float"
    )


def DEFINE_boolean(name, default, help, flag_values=FLAGS):  # noqa: N802,A002
    return DEFINE(_parse_bool, name, default, help, flag_values, "bool")


DEFINE_bool = DEFINE_boolean


def DEFINE_enum(name, default, enum_values, help, flag_values=FLAGS):  # noqa: N802,A002
    return DEFINE(str, name, default, help, flag_values, "enum", enum_values=list(enum_values))


def DEFINE_list(name, default, help, flag_values=FLAGS):  # noqa: N802,A002
    return DEFINE(_parse_list, name, default, help, flag_values, "list")


def DEFINE_multi(parser, name, default, help, flag_values=FLAGS, flag_type="multi", **extra):  # noqa: N802,A002,E501
    """A flag that may be given many times; its value is the list of the values."""
    return DEFINE(parser, name, default, help, flag_values, flag_type, multi=True, **extra)


def DEFINE_multi_string(name, default, help, flag_values=FLAGS):  # noqa: N802,A002
    return DEFINE_multi(str, name, default, help, flag_values, "multi_string")


def DEFINE_multi_integer(
    name, default, help, lower_bound=None, upper_bound=None, flag_values=FLAGS
):  # noqa: N802,A002,E501
    return DEFINE_multi(
        _bounded(_parse_int, lower_bound, upper_bound),
        name,
        default,
        help,
        flag_values,
        "multi_int",
    )


def DEFINE_multi_float(name, default, help, lower_bound=None, upper_bound=None, flag_values=FLAGS):  # noqa: N802,A002,E501
    return DEFINE_multi(
        _bounded(float, lower_bound, upper_bound),
        name,
        default,
        help,
        flag_values,
        "multi_float",
    )


def DEFINE_multi_enum(name, default, enum_values, help, flag_values=FLAGS, case_sensitive=True):  # noqa: N802,A002,E501
    return DEFINE_multi(
        str,
        name,
        default,
        help,
        flag_values,
        "multi_enum",
        enum_values=list(enum_values),
        case_sensitive=case_sensitive,
    )


def mark_flag_as_required(flag_name, flag_values=FLAGS) -> None:
    flag_values[flag_name].required = True


def mark_flags_as_required(flag_names, flag_values=FLAGS) -> None:
    for name in flag_names:
        mark_flag_as_required(name, flag_values)
