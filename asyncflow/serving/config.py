"""tensorflow_model_server's `--model_config_file`: a ModelServerConfig in text format.

    model_config_list {
      config {
        name: "m"  base_path: "/models/m"  model_platform: "tensorflow"
        model_version_policy { specific { versions: 1 versions: 2 } }
        # or: model_version_policy { all {} } / { latest { num_versions: 2 } }
        version_labels { key: "stable" value: 1 }
      }
    }

`parse_model_config(text)` gives `ModelConfig`s; `select_versions(policy, available)`
applies a version policy (TF Serving's default: the latest one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from asyncflow import errors

__all__ = ["ModelConfig", "parse_text_proto", "parse_model_config", "select_versions"]

_TOKEN = re.compile(
    r"""\s*(?:(?P<comment>\#[^\n]*)|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
    r"""|(?P<punct>[{}:<>])|(?P<word>[-+\w.]+))"""
)


def _tokens(text: str):
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise errors.InvalidArgumentError(
                None, None, f"Could not parse model config near: {text[pos : pos + 30]!r}"
            )
        pos = m.end()
        if m["comment"]:
            continue
        if m["str"]:
            yield ("str", m["str"][1:-1].encode().decode("unicode_escape"))
        elif m["punct"]:
            yield ("punct", m["punct"])
        else:
            yield ("word", m["word"])


def parse_text_proto(text: str) -> dict:
    """Protobuf text format -> {field: [values]} (messages as nested dicts)."""
    tokens = list(_tokens(text))
    pos = 0

    def message(closing):
        nonlocal pos
        fields: dict = {}
        while True:
            if pos >= len(tokens):
                if closing is None:
                    return fields
                raise errors.InvalidArgumentError(None, None, "Model config: missing '}'")
            kind, tok = tokens[pos]
            if kind == "punct" and tok == closing:
                pos += 1
                return fields
            if kind != "word":
                raise errors.InvalidArgumentError(None, None, f"Model config: unexpected {tok!r}")
            name = tok
            pos += 1
            if pos < len(tokens) and tokens[pos] == ("punct", ":"):
                pos += 1
            if pos >= len(tokens):
                raise errors.InvalidArgumentError(None, None, f"Model config: {name} has no value")
            kind, tok = tokens[pos]
            pos += 1
            if kind == "punct" and tok in "{<":
                value = message("}" if tok == "{" else ">")
            elif kind == "str":
                value = tok
            elif kind == "word":
                value = _scalar(tok)
            else:
                raise errors.InvalidArgumentError(None, None, f"Model config: unexpected {tok!r}")
            fields.setdefault(name, []).append(value)

    return message(None)


def _scalar(word: str):
    if re.fullmatch(r"[-+]?\d+", word):
        return int(word)
    try:
        return float(word)
    except ValueError:
        return word  # true/false/enum names


@dataclass
class ModelConfig:
    name: str
    base_path: str
    policy: tuple = ("latest", 1)  # ("latest", n) | ("all",) | ("specific", (v, ...))
    labels: dict = field(default_factory=dict)


def _one(fields: dict, name: str, default=None):
    values = fields.get(name)
    return values[-1] if values else default


def parse_model_config(text: str) -> list[ModelConfig]:
    """The models of a ModelServerConfig (only model_config_list is understood)."""
    top = parse_text_proto(text)
    if "custom_model_config" in top:
        raise errors.UnimplementedError(None, None, "custom_model_config is not supported")
    configs = []
    for lst in top.get("model_config_list", []):
        for c in lst.get("config", []):
            name = _one(c, "name")
            base_path = _one(c, "base_path")
            if not name or not base_path:
                raise errors.InvalidArgumentError(
                    None, None, "Each model config needs a name and a base_path"
                )
            platform = _one(c, "model_platform", "tensorflow")
            if platform != "tensorflow":
                raise errors.InvalidArgumentError(
                    None, None, f"Model {name}: model_platform {platform} is not supported"
                )
            policy = ("latest", 1)
            p = _one(c, "model_version_policy")
            if p:
                if "all" in p:
                    policy = ("all",)
                elif "specific" in p:
                    versions = tuple(int(v) for v in _one(p, "specific").get("versions", []))
                    if not versions:
                        raise errors.InvalidArgumentError(
                            None, None, f"Model {name}: specific policy without versions"
                        )
                    policy = ("specific", versions)
                elif "latest" in p:
                    policy = ("latest", int(_one(_one(p, "latest"), "num_versions", 1)))
            labels = {}
            for entry in c.get("version_labels", []):
                labels[str(_one(entry, "key"))] = int(_one(entry, "value"))
            if any(n.name == name for n in configs):
                raise errors.InvalidArgumentError(None, None, f"Duplicate model name: {name}")
            configs.append(ModelConfig(name, base_path, policy, labels))
    return configs


def select_versions(policy: tuple, available: list[int]) -> list[int]:
    """The versions a policy serves out of `available` (ascending)."""
    available = sorted(available)
    if policy[0] == "all":
        return available
    if policy[0] == "specific":
        return [v for v in available if v in set(policy[1])]
    return available[-policy[1] :] if policy[1] > 0 else []
