#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The catalog side of scripts/build-bitstreams: what it reads from the
source catalog's manifest, and the board catalog's manifest it writes.

The source is a version 2 manifest as bitstreams/manifest.toml is (the
daemon's reader is firmware/fabricd/src/catalog/mod.rs, Manifest::parse):
``[shell]``, ``[[engine]]`` (name, kind, version, images) and ``[[model]]``
(name, engine, table, table_sha256, table_crc, identity, tokenizer,
tokenizer_sha256). Only the engines' kind and version and the models'
entries and files are taken from it: the engines' images are the flow's.

  plan --from DIR --board B --engines "A B" [--models "A B"] [--dtso FILE]
      Checks the source manifest, the engines (each in it, once) and the
      models (default: every model whose engine is built; a named one must
      be in it and run on a built engine), and every model's table and
      tokenizer against the manifest's sha256. With --dtso, the fit check:
      each table must fit a slot's region of the board's DMA buffer (see
      region_bound). Prints, one a line, for the shell:
          shell MAJOR INTERFACE_ID
          engine NAME KIND VERSION
          model NAME TABLE_BYTES
          region BYTES            (with --dtso)

  write --from DIR --stage DIR --images TSV --board B --part P
        --engines "A B" [--models "A B"]
      Copies each model's table and tokenizer into STAGE, checks the
      copies' sha256 against the source manifest, and writes
      STAGE/manifest.toml (version 2) with the engines' images that the
      flow listed in TSV (kind, engine, slots, file; rtl/vivado/flow.tcl).

Every refusal is one line on stderr, "build-bitstreams: ...", naming what
is wrong, and exit status 1.
"""

import argparse
import hashlib
import pathlib
import re
import shutil
import sys
import tomllib

PROG = "build-bitstreams"
# What the daemon's layout of the DMA buffer takes before the slots'
# regions (rings, prompt and output arenas: fabric-hw's rings::Layout with
# fabricd's ring sizes), rounded up; the regions are whole pages.
RINGS_AND_ARENAS = 1 << 20
PAGE = 4096
SLOTS = 2
HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class Refused(Exception):
    """A refusal: its text is the message, after "build-bitstreams: "."""


def valid_name(name):
    """The daemon's rule for an engine's or a model's name
    (valid_model_name in firmware/fabricd/src/catalog/mod.rs)."""
    return (
        isinstance(name, str)
        and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) is not None
        and ".." not in name
        and len(name) <= 64
    )


def plain_file(name):
    """The daemon's rule for a file the manifest names (plain_name)."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not any(c in name for c in "/\\\0")
    )


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Source:
    """The source catalog: its manifest, checked for what this script uses."""

    def __init__(self, directory):
        self.dir = pathlib.Path(directory)
        self.path = self.dir / "manifest.toml"
        try:
            m = tomllib.loads(self.path.read_text())
        except OSError as e:
            raise Refused(f"reading {self.path}: {e.strerror}") from e
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise Refused(f"{self.path} does not parse: {e}") from e
        if m.get("version") != 2:
            raise Refused(
                f"{self.path}: version {m.get('version')!r}, not 2 (engines, and models as tables)"
            )
        shell = m.get("shell")
        if not isinstance(shell, dict) or set(shell) != {"major", "interface_id"}:
            raise Refused(f"{self.path}: [shell] must hold major and interface_id, and only them")
        major, iface = shell["major"], shell["interface_id"]
        if not (isinstance(major, int) and 0 <= major <= 0xFFFF):
            raise Refused(f"{self.path}: [shell] major {major!r} is not a 16-bit number")
        if not (isinstance(iface, int) and 0 <= iface <= 0xFFFFFFFF):
            raise Refused(f"{self.path}: [shell] interface_id {iface!r} is not a 32-bit number")
        self.major, self.interface_id = major, iface
        self.engines = {}
        for e in m.get("engine", []):
            name = e.get("name")
            if not valid_name(name):
                raise Refused(f"{self.path}: engine name {name!r} is not a plain name")
            if name in self.engines:
                raise Refused(f"{self.path}: engine {name} is listed twice")
            for key in ("kind", "version"):
                v = e.get(key)
                if not (isinstance(v, int) and 1 <= v <= 0xFFFF):
                    raise Refused(f"{self.path}: engine {name}: {key} {v!r} is not from 1 to 65535")
            self.engines[name] = e
        self.models = {}
        for e in m.get("model", []):
            name = e.get("name")
            if not valid_name(name):
                raise Refused(f"{self.path}: model name {name!r} is not a plain name")
            if name in self.models:
                raise Refused(f"{self.path}: model {name} is listed twice")
            for key in ("engine", "table", "tokenizer"):
                if not isinstance(e.get(key), str):
                    raise Refused(f"{self.path}: model {name} has no {key}")
            for key in ("table", "tokenizer"):
                if not plain_file(e[key]):
                    raise Refused(f"{self.path}: model {name}: {key} {e[key]!r} is not a plain file name")
            for key in ("table_sha256", "identity", "tokenizer_sha256"):
                if not (isinstance(e.get(key), str) and HEX64.match(e[key].strip())):
                    raise Refused(f"{self.path}: model {name}: {key} {e.get(key)!r} is not 64 hex digits")
            crc = e.get("table_crc")
            if not (isinstance(crc, int) and 0 <= crc <= 0xFFFFFFFF):
                raise Refused(f"{self.path}: model {name}: table_crc {crc!r} is not a 32-bit number")
            self.models[name] = e

    def select(self, engines, models):
        """The engines to build and the models to ship, both in the order
        given (models by default in the manifest's order), checked."""
        known = ", ".join(self.engines) or "none"
        chosen = []
        for name in engines:
            if name not in self.engines:
                raise Refused(f"engine {name!r} is not in {self.path} (engines: {known})")
            if name in chosen:
                raise Refused(f"engine {name} is given twice")
            chosen.append(name)
        if not chosen:
            raise Refused("no engine to build")
        if models:
            picked = []
            for name in models:
                if name not in self.models:
                    raise Refused(
                        f"model {name!r} is not in {self.path} (models: {', '.join(self.models) or 'none'})"
                    )
                if name in picked:
                    raise Refused(f"model {name} is given twice")
                engine = self.models[name]["engine"]
                if engine not in chosen:
                    raise Refused(
                        f"model {name} runs on engine {engine}, which this build does not make (engines: {', '.join(chosen)})"
                    )
                picked.append(name)
        else:
            picked = [n for n, e in self.models.items() if e["engine"] in chosen]
            if not picked:
                raise Refused(f"no model in {self.path} runs on {', '.join(chosen)}")
        return chosen, picked

    def check_files(self, model):
        """The model's table and tokenizer, present and as the manifest says."""
        e = self.models[model]
        for key in ("table", "tokenizer"):
            path = self.dir / e[key]
            if not path.is_file():
                raise Refused(f"model {model}: no {e[key]} in {self.dir}")
            found, want = sha256(path), e[f"{key}_sha256"].strip().lower()
            if found != want:
                raise Refused(
                    f"model {model}: {path} has sha256 {found}, {self.path} says {want}"
                )


def dt_text(dtso, seen=()):
    """The device tree source as dtc reads it: /include/ "file" (relative to
    the including file) replaced by that file, comments removed."""
    dtso = pathlib.Path(dtso)
    if dtso.resolve() in seen:
        raise Refused(f"{dtso} includes itself")
    try:
        text = dtso.read_text()
    except OSError as e:
        raise Refused(f"reading {dtso}: {e.strerror}") from e
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    if re.search(r"^\s*#include\b", text, flags=re.M):
        raise Refused(f"{dtso}: #include needs the C preprocessor, which this check does not run")

    def include(m):
        return dt_text(dtso.parent / m.group(1), seen + (dtso.resolve(),))

    return re.sub(r'/include/\s*"([^"]+)"', include, text)


def buffer_size(dtso):
    """udmabuf-fabric's size in the board's device tree, in bytes: the last
    `size = <...>;` given to the node (by name, or by a &label reference
    later on), its cells big-endian 32-bit words as dtc reads them."""
    text = dt_text(dtso)
    labels = set()
    for m in re.finditer(r"(?:([A-Za-z_][\w]*)\s*:\s*)?\budmabuf-fabric(?:@[0-9a-fA-F]+)?\s*\{", text):
        if m.group(1):
            labels.add(m.group(1))
    opens = [m.end() for m in re.finditer(r"\budmabuf-fabric(?:@[0-9a-fA-F]+)?\s*\{", text)]
    opens += [m.end() for label in labels for m in re.finditer(r"&" + label + r"\s*\{", text)]
    size = None
    for start in sorted(opens):
        depth, i = 1, start
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[start:i]
        # The node's own properties, not its children's.
        own = re.sub(r"\{[^{}]*\}", "", body[:-1])
        while re.search(r"\{[^{}]*\}", own):
            own = re.sub(r"\{[^{}]*\}", "", own)
        for m in re.finditer(r"(?<![\w,-])size\s*=\s*<([^>]*)>\s*;", own):
            cells = m.group(1).split()
            try:
                words = [int(c, 0) for c in cells]
            except ValueError:
                raise Refused(f"{dtso}: udmabuf-fabric's size <{m.group(1)}> is not numbers") from None
            if not words or any(not 0 <= w <= 0xFFFFFFFF for w in words):
                raise Refused(f"{dtso}: udmabuf-fabric's size <{m.group(1)}> is not 32-bit cells")
            size = 0
            for w in words:
                size = size << 32 | w
    if size is None:
        raise Refused(f"{dtso} (and what it includes) has no udmabuf-fabric node with a size")
    return size


def region_bound(size):
    """The largest table a slot's region surely holds: the buffer less what
    the rings and arenas take (under RINGS_AND_ARENAS), split between the
    slots, in whole pages, as fabric-hw's Tables::new splits it. It is
    conservative: the daemon's region is this or larger."""
    return max(size - RINGS_AND_ARENAS, 0) // SLOTS // PAGE * PAGE


def toml_str(s):
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def read_images(tsv, stage, engines):
    """images.tsv as the flow writes it, by engine: partial images by slot,
    then the full one, each (kind, slots, file name)."""
    images = {name: [] for name in engines}
    try:
        lines = pathlib.Path(tsv).read_text().splitlines()
    except OSError as e:
        raise Refused(f"reading the flow's list of images {tsv}: {e.strerror}") from e
    for n, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) != 4:
            raise Refused(f"{tsv}:{n}: not kind, engine, slots, file: {line!r}")
        kind, engine, slots, file = fields
        if kind not in ("partial", "full"):
            raise Refused(f"{tsv}:{n}: kind {kind!r} is not partial or full")
        if engine not in images:
            raise Refused(f"{tsv}:{n}: engine {engine!r} is not one this build makes")
        if not re.fullmatch(r"[01](,[01])*", slots):
            raise Refused(f"{tsv}:{n}: slots {slots!r} are not slot numbers")
        slots = [int(s) for s in slots.split(",")]
        if kind == "partial" and len(slots) != 1:
            raise Refused(f"{tsv}:{n}: a partial image of {engine} for slots {slots}: one slot each")
        name = pathlib.PurePath(file).name
        if not (pathlib.Path(stage) / name).is_file():
            raise Refused(f"the flow listed {name} but did not write it")
        images[engine].append((kind, slots, name))
    for engine, listed in images.items():
        if not listed:
            raise Refused(f"the flow listed no image of engine {engine} ({tsv})")
        listed.sort(key=lambda i: (i[0] != "partial", i[1]))
    return images


def write(src, stage, tsv, board, part, engines, models):
    stage = pathlib.Path(stage)
    images = read_images(tsv, stage, engines)
    for model in models:
        e = src.models[model]
        for key in ("table", "tokenizer"):
            copy = stage / e[key]
            shutil.copyfile(src.dir / e[key], copy)
            found, want = sha256(copy), e[f"{key}_sha256"].strip().lower()
            if found != want:
                raise Refused(
                    f"model {model}: the copy of {e[key]} in {stage} has sha256 {found}, {src.path} says {want}"
                )
    out = [
        f"# The catalog for the {board} ({part}): written by scripts/build-bitstreams",
        "# from Vivado's DFX flow (rtl/vivado/): the engines' images, and the models",
        "# (tables the daemon writes into DDR and commits) and tokenizers from the",
        "# simulator's catalog. The daemon checks every sha256 before anything is",
        "# flashed or committed. shell/ holds the static shell the board boots with.",
        "version = 2",
        "",
        "[shell]",
        f"major = {src.major}",
        f"interface_id = 0x{src.interface_id:08X}",
    ]
    for name in engines:
        e = src.engines[name]
        out += ["", "[[engine]]", f"name = {toml_str(name)}"]
        if e.get("description"):
            out.append(f"description = {toml_str(e['description'])}")
        out += [f"kind = {e['kind']}", f"version = {e['version']}"]
        for kind, slots, file in images[name]:
            out += [
                "",
                "[[engine.image]]",
                f"file = {toml_str(file)}",
                f"sha256 = {toml_str(sha256(stage / file))}",
                f"part = {toml_str(part)}",
                f"slots = [{', '.join(map(str, slots))}]",
                f"kind = {toml_str(kind)}",
            ]
    for name in models:
        e = src.models[name]
        out += ["", "[[model]]", f"name = {toml_str(name)}"]
        if e.get("description"):
            out.append(f"description = {toml_str(e['description'])}")
        out += [
            f"engine = {toml_str(e['engine'])}",
            f"table = {toml_str(e['table'])}",
            f"table_sha256 = {toml_str(e['table_sha256'].strip().lower())}",
            f"table_crc = 0x{e['table_crc']:08x}",
            f"identity = {toml_str(e['identity'].strip().lower())}",
            f"tokenizer = {toml_str(e['tokenizer'])}",
            f"tokenizer_sha256 = {toml_str(e['tokenizer_sha256'].strip().lower())}",
        ]
    text = "\n".join(out) + "\n"
    # What was written must read back as what was meant.
    back = tomllib.loads(text)
    if [e["name"] for e in back["engine"]] != engines or [m["name"] for m in back["model"]] != models:
        raise Refused(f"the manifest written for {stage} does not read back as its engines and models")
    (stage / "manifest.toml").write_text(text)


def main(argv):
    p = argparse.ArgumentParser(prog="bitstream-catalog.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd in ("plan", "write"):
        s = sub.add_parser(cmd)
        s.add_argument("--from", dest="src", required=True)
        s.add_argument("--board", required=True)
        s.add_argument("--engines", required=True)
        s.add_argument("--models", default="")
        if cmd == "plan":
            s.add_argument("--dtso")
        else:
            s.add_argument("--stage", required=True)
            s.add_argument("--images", required=True)
            s.add_argument("--part", required=True)
    a = p.parse_args(argv)
    try:
        src = Source(a.src)
        engines, models = src.select(a.engines.split(), a.models.split())
        for model in models:
            src.check_files(model)
        if a.cmd == "write":
            write(src, a.stage, a.images, a.board, a.part, engines, models)
            return 0
        lines = [f"shell {src.major} 0x{src.interface_id:08X}"]
        for name in engines:
            lines.append(f"engine {name} {src.engines[name]['kind']} {src.engines[name]['version']}")
        sizes = {m: (src.dir / src.models[m]["table"]).stat().st_size for m in models}
        for model in models:
            lines.append(f"model {model} {sizes[model]}")
        if a.dtso:
            size = buffer_size(a.dtso)
            bound = region_bound(size)
            for model in models:
                if sizes[model] > bound:
                    raise Refused(
                        f"model {model}: its table {src.models[model]['table']} is {sizes[model]} bytes, "
                        f"more than a slot's region of the {a.board}'s DMA buffer surely holds: {bound} bytes "
                        f"(udmabuf-fabric's {size} bytes in {a.dtso}, less 1 MiB for the rings and arenas, "
                        f"halved, in whole pages; a conservative bound: --skip-fit-check to run Vivado anyway)"
                    )
            lines.append(f"region {bound}")
        print("\n".join(lines))
        return 0
    except Refused as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
