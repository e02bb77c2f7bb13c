#!/usr/bin/env bash
# The Vivado flow (rtl/vivado/, run by scripts/build-bitstreams) without
# Vivado: the flow runs under tclsh with every Vivado command stubbed
# (tests/vivado/stubs.tcl: each call logged, each refusal Vivado documents
# kept, any command not stubbed an error), for the KV260 and the ZedBoard
# and for a source catalog with two engines, and the order of the logged
# calls is checked against UG909's DFX flow: each engine's slot synthesized
# out of context with its ENGINE generic (version << 16 | kind, from the
# source manifest) and the board's DAW, from the rtl/slot module of its
# kind (the one whose default ENGINE is of that kind) under the
# partition's module name, fabric_slot; the static synthesized before
# implementation with the slot a black box, every RP cell (slot0.rm,
# slot1.rm) HD.RECONFIGURABLE before opt_design, each engine read into each
# cell with read_checkpoint -cell, the Pblocks read before placement, the static
# locked before the second configuration, the grey box implemented,
# pr_verify over every configuration before any bitstream, a partial image
# for every (slot, engine) pair, a full one per engine and a blank one per
# slot, UserID the interface id, the board's part, the addresses,
# interrupt and engines' HP ports (read and write, as wide as fabric_ps's)
# of the board's block design against its device tree, and a version 2
# manifest whose engines' files, hashes,
# parts and slots are right and whose models (tables in DDR, not in any
# bitstream) are the source catalog's, their tables and tokenizers copied
# with matching sha256, identity and table_crc. The flow's own Tcl is run
# for real on its arguments (--engine's refusals) and configurations. Then
# the checks are run against broken copies of the flow (each must fail,
# naming what is wrong), and build-bitstreams' refusals are checked (among
# them a table too large for a slot's region of the DMA buffer, an unknown
# engine or model, a source file whose sha256 is not the manifest's), each
# before Vivado runs. The out-of-context timing script (rtl/vivado/
# timing.tcl) is run the same way for both boards: each part alone, its
# clock at the board's period before placement, its timing and logic levels
# reported after routing; a part with negative slack fails it, and a copy
# without the clock is caught. With Yosys: the slot's black box and the
# transformer's wrapper have fabric_slot's parameters and ports, every
# module of a partition has its ports, fabric_top has the cells the flow
# names (slot0.rm, slot1.rm: with its defaults fabric_slot, with a
# transformer chosen fabric_slot_lm in the same cell), and each board's
# engines are the ones rtl/slot implements.
#
# What this does not show: that Vivado accepts the flow. Nothing here has
# run on Vivado; see rtl/vivado/README.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
command -v tclsh >/dev/null || { echo "FAIL: tclsh not found (apt-get install tcl)"; exit 1; }
python3 -c 'import tomllib' 2>/dev/null || { echo "FAIL: python3 with tomllib (3.11 or later) not found"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passed=0
iface=$(sed -n 's/^interface_id = //p' bitstreams/manifest.toml)
iface_upper="0X$(tr 'a-f' 'A-F' <<< "${iface#0x}")"
# The slots, as the catalog names their images, and each one's cell in
# fabric_top (the instance rm of its generate block; Yosys checks it below).
slots=(slot0 slot1)
rp_cell() { echo "$1.rm"; }

# The RTL as the flow reads it: the real shell, engine and slot, and a
# stand-in board top (the stubs read no more of it than its module name).
mkdir -p "$tmp/rtl/top"
for d in common shell engine slot; do ln -s "$repo/rtl/$d" "$tmp/rtl/$d"; done
printf '// stand-in for rtl/top/fabric_top.v: the Vivado stubs parse no Verilog\nmodule fabric_top;\nendmodule\n' \
    > "$tmp/rtl/top/fabric_top.v"

# A board's row of build-bitstreams' table: part, engines.
board_part() { sed -n '/^BOARDS="/,/^"/p' scripts/build-bitstreams | awk -v b="$1" '$1 == b { print $2 }'; }
board_engines() {
    sed -n '/^BOARDS="/,/^"/p' scripts/build-bitstreams \
        | awk -v b="$1" '$1 == b { for (i = 3; i <= NF; i++) printf "%s%s", $i, (i < NF ? " " : "") }'
}
# The board file's HP address width: the shell's and the slots' DAW.
board_daw() { sed -n 's/^dict set ::fabric::board dma_addr_bits \([0-9]*\)$/\1/p' "rtl/vivado/boards/$1.tcl"; }
# The board's device tree: its overlay and what it includes.
device_tree() {
    local dtso="device-tree/fabricd-shell-$1.dtso" inc
    cat "$dtso"
    sed -n 's|^/include/ "\(.*\)"|\1|p' "$dtso" | while read -r inc; do cat "device-tree/$inc"; done
}
# A source catalog's manifest, asked: `engine-id NAME` (what its slot
# reports in SLOT_ENGINE, version << 16 | kind, decimal), `engine-kind
# NAME` or `models "ENGINES"` (its models that run on them, in its order).
source_query() { # DIR WHAT ARG
    python3 - "$@" <<'PY'
import pathlib, sys, tomllib
src, what, arg = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
m = tomllib.loads((src / "manifest.toml").read_text())
if what == "engine-id":
    print(next((e["version"] << 16 | e["kind"] for e in m.get("engine", []) if e["name"] == arg), ""))
elif what == "engine-kind":
    print(next((e["kind"] for e in m.get("engine", []) if e["name"] == arg), ""))
else:
    print(" ".join(x["name"] for x in m.get("model", []) if x["engine"] in arg.split()))
PY
}
# A regular expression matching NAME literally.
re_quote() { sed 's/[][\.*^$+?(){}|/]/\\&/g' <<< "$1"; }
# A slot's cell, as a regular expression.
rp_cell_re() { re_quote "$(rp_cell "$1")"; }
# The rtl/slot module that implements engines of KIND: the one whose
# default ENGINE (version << 16 | kind, written {16'dVERSION, 16'dKIND}) is
# of that kind.
rtl_module_of_kind() {
    local f
    for f in rtl/slot/*.v; do
        sed -n "s/^ *parameter \[31:0\] *ENGINE = {16'd[0-9]*, 16'd$1}.*/$(basename "$f" .v)/p" "$f"
    done
}

# run_flow NAME BOARD [FLOW] [ENV=VALUE...] [-- ARG...]: build-bitstreams
# for BOARD with the fake vivado, ARGs added; sets $log, $out, $work,
# $status and $output, and what the checks expect: $src (the source
# catalog), $engines and $models.
run_flow() {
    local name=$1 board=$2 flow=${3:-$repo/rtl/vivado}
    shift 2
    [ $# -eq 0 ] || shift
    local envs=() args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ $# -eq 0 ] || { shift; args=("$@"); }
    src="$repo/bitstreams" engines=$(board_engines "$board") models=""
    local i
    for ((i = 0; i < ${#args[@]}; i++)); do
        case "${args[$i]}" in
            --from) src=${args[$((i + 1))]} ;;
            --engines) engines=${args[$((i + 1))]} ;;
            --models) models=${args[$((i + 1))]} ;;
        esac
    done
    [ -n "$models" ] || models=$(source_query "$src" models "$engines")
    local dir="$tmp/$name/$board"
    mkdir -p "$dir"
    log="$dir/calls.log" out="$dir/out" work="$dir/work"
    : > "$log"
    set +e
    output=$(env PATH="$repo/tests/vivado:$PATH" VIVADO_STUB_LOG="$log" "${envs[@]}" \
        scripts/build-bitstreams --rtl "$tmp/rtl" --flow "$flow" --out "$out" --work "$work" \
        "${args[@]}" "$board" 2>&1)
    status=$?
    set -e
}

# The checks. Each adds what is wrong to $problems, naming it.
problems=()
problem() { problems+=("$*"); }
first() { { grep -n -m1 -E -- "$1" "$log" || true; } | cut -d: -f1; }
all() { { grep -n -E -- "$1" "$log" || true; } | cut -d: -f1; }
nth() { all "$1" | sed -n "$2p"; }
# before A B WHAT: the first call matching A comes before the first matching B.
before() {
    local a b
    a=$(first "$1")
    b=$(first "$2")
    if [ -z "$a" ]; then problem "no call matches /$1/ ($3)"
    elif [ -z "$b" ]; then problem "no call matches /$2/ ($3)"
    elif [ "$a" -gt "$b" ]; then problem "$3: /$1/ at call $a comes after /$2/ at call $b"
    fi
}
has() { [ -n "$(first "$1")" ] || problem "no call matches /$1/ ($2)"; }

check_part() {
    local part=$1 dt_part bad
    dt_part=$(device_tree "$board" | sed -n 's/.*fabricd,part = "\(.*\)";/\1/p')
    [ "$part" = "$dt_part" ] || problem "build-bitstreams gives $board the part $part, its device tree $dt_part"
    has "^synth_design .*-part $part( |$)" "synthesis for $part"
    bad=$(grep -E '^(create_project|synth_design) ' "$log" | grep -v -- "-part $part\( \|$\)" || true)
    [ -z "$bad" ] || problem "a call names another part than $part: $bad"
}

# Each engine's slot synthesized out of context once, with its ENGINE
# generic and the DAW of the board (the static's: the module's ports must be
# the partition's), from the rtl/slot module of its kind: fabric_slot's own
# file, or that module under fabric_slot's name (a generated wrapper in
# place of rtl/slot/fabric_slot.v); no table in any synthesis (models are
# tables in DDR).
check_synthesis() {
    local e id daw static_daw lines ooc at reads module
    daw=$(board_daw "$board")
    static_daw=$(sed -n 's/^synth_design -top fabric_top .*-generic DAW=\([0-9]*\).*/\1/p' "$log")
    [ "$static_daw" = "$daw" ] || problem "the static is synthesized with DAW ${static_daw:-none}, the board file says $daw"
    ooc=$(grep -c '^synth_design -mode out_of_context -top fabric_slot ' "$log" || true)
    [ "$ooc" -eq "$(wc -w <<< "$engines")" ] \
        || problem "$ooc out-of-context syntheses of fabric_slot for the $(wc -w <<< "$engines") engines $engines"
    for e in $engines; do
        id=$(source_query "$src" engine-id "$e")
        lines=$(grep -E -- "^synth_design -mode out_of_context -top fabric_slot .*-generic ENGINE=$id( |$)" "$log" || true)
        if [ -z "$lines" ]; then
            problem "engine $e's slot is not synthesized out of context with ENGINE=$id (version << 16 | kind, from the source manifest)"
        elif [ "$(wc -l <<< "$lines")" -ne 1 ]; then
            problem "engine $e's slot is synthesized $(wc -l <<< "$lines") times with ENGINE=$id"
        elif ! grep -qE -- "-generic DAW=$daw( |$)" <<< "$lines"; then
            problem "engine $e's slot is synthesized without -generic DAW=$daw (the board's): its ports would not be the partition's"
        else
            module=$(rtl_module_of_kind "$(source_query "$src" engine-kind "$e")")
            at=$(first "^synth_design -mode out_of_context -top fabric_slot .*-generic ENGINE=$id( |$)")
            reads=$(awk -v n="$at" 'NR < n && /^read_verilog /{ r = $0 } NR == n { print r; exit }' "$log")
            if [ -z "$module" ]; then
                problem "engine $e: no module of rtl/slot implements its kind"
            elif ! grep -q "/slot/$module\.v" <<< "$reads"; then
                problem "engine $e's slot is not synthesized from $module (rtl/slot/$module.v, its kind's): $reads"
            elif [ "$module" != fabric_slot ]; then
                grep -q "/gen/${module}_as_fabric_slot\.v" <<< "$reads" \
                    || problem "engine $e's slot ($module) is synthesized without its wrapper named fabric_slot: $reads"
                if grep -q "/slot/fabric_slot\.v" <<< "$reads"; then
                    problem "engine $e's slot ($module) reads rtl/slot/fabric_slot.v too: two modules named fabric_slot"
                fi
            fi
        fi
    done
    if grep -qE 'TABLE_(HEX|WORDS)' "$log"; then
        problem "a synthesis still has a table generic (TABLE_HEX or TABLE_WORDS): $(grep -m1 -E 'TABLE_(HEX|WORDS)' "$log")"
    fi
    before "^synth_design -top fabric_top " "^opt_design" "the static design is synthesized before implementation"
    local reads
    reads=$(awk '/^read_verilog /{ r = $0 } /^synth_design -top fabric_top /{ print r; exit }' "$log")
    grep -q 'fabric_slot_black_box\.v' <<< "$reads" \
        || problem "the static design is synthesized without the slot's black-box definition: $reads"
    if grep -q '/slot/' <<< "$reads"; then
        problem "the static design's sources include the slot's own (rtl/slot/): the RP would not be a black box"
    fi
}

check_implementation() {
    local board_name=$1 cell slot i e n pblock lock
    for slot in "${slots[@]}"; do
        cell=$(rp_cell_re "$slot")
        before "^set_property HD.RECONFIGURABLE (true|1) $cell$" "^opt_design" \
            "RP cell $cell is marked HD.RECONFIGURABLE before opt_design"
    done
    # Engine i in slot0 and engine i+1 in slot1 of configuration i: every
    # (slot, engine) pair is read into its cell.
    for e in $engines; do
        for slot in "${slots[@]}"; do
            cell=$(rp_cell_re "$slot")
            has "^read_checkpoint -cell $cell .*/rm_$(re_quote "$e")\.dcp$" "engine $e read into $cell with read_checkpoint -cell"
        done
    done
    # The grey box: both cells buffered, no module.
    for slot in "${slots[@]}"; do
        cell=$(rp_cell_re "$slot")
        has "^update_design -cells? $cell -buffer_ports$" "the grey box configuration buffers $cell"
    done
    before "^read_xdc .*/pblocks_$board_name\.xdc$" "^place_design" "the Pblocks are read before place_design"
    for slot in "${slots[@]}"; do
        cell=$(rp_cell_re "$slot")
        pblock=$(sed -n "s/^add_cells_to_pblock \([^ ]*\) $cell$/\1/p" "$log" | head -n1)
        if [ -z "$pblock" ]; then problem "no Pblock holds $cell"; continue; fi
        has "^set_property RESET_AFTER_RECONFIG true $pblock$" "$pblock has RESET_AFTER_RECONFIG"
        has "^set_property SNAPPING_MODE ON $pblock$" "$pblock has SNAPPING_MODE ON"
        has "^resize_pblock $pblock -add " "$pblock has sites"
    done
    lock=$(first "^lock_design -level routing$")
    if [ -z "$lock" ]; then
        problem "the static is never locked (lock_design -level routing)"
    else
        for slot in "${slots[@]}"; do
            cell=$(rp_cell_re "$slot")
            before "^update_design -cells? $cell -black_box$" "^lock_design -level routing$" \
                "$cell is emptied (update_design -black_box) before the static is locked"
        done
        before "^route_design" "^lock_design -level routing$" "the first configuration is routed before the static is locked"
        n=$(nth "^place_design" 2)
        if [ -z "$n" ]; then problem "only one configuration is placed"
        elif [ "$lock" -gt "$n" ]; then
            problem "lock_design -level routing (call $lock) comes after the second configuration's place_design (call $n)"
        fi
        before "^lock_design -level routing$" "^write_checkpoint -force .*/static_routed\.dcp$" \
            "the static checkpoint is written after the lock"
        for i in $(all "^open_checkpoint .*/impl/"); do
            [ "$i" -gt "$lock" ] || problem "a configuration is opened (call $i) before the static is locked (call $lock)"
        done
    fi
}

check_verify() {
    local pv configs c
    pv=$(first "^pr_verify ")
    if [ -z "$pv" ]; then problem "pr_verify is never called"; return; fi
    [ "$(all "^pr_verify " | wc -l)" -eq 1 ] || problem "pr_verify is called more than once"
    configs=$(sed -n 's/^write_checkpoint -force \(.*_routed\.dcp\)$/\1/p' "$log" | grep -v '/static_routed\.dcp$' || true)
    [ "$(wc -w <<< "$configs")" -eq $(($(wc -w <<< "$engines") + 1)) ] \
        || problem "$(wc -w <<< "$configs") configurations are written, not one per engine and the grey box: $configs"
    for c in $configs; do
        sed -n "${pv}p" "$log" | grep -qF -- "$c" || problem "pr_verify does not compare configuration $(basename "$c")"
    done
    before "^pr_verify " "^write_bitstream " "pr_verify runs before any bitstream is written"
}

# holds FILE SLOT ENGINE: the stub image FILE has ENGINE's module in SLOT's
# cell.
holds() {
    local id
    id=$(source_query "$src" engine-id "$3")
    grep -qE "^cell $(rp_cell_re "$2") module rm_$(re_quote "$3")\.dcp ENGINE=$id( |$)" "$1"
}

check_images() {
    local e slot cell f next list
    read -r -a list <<< "$engines"
    for e in $engines; do
        for slot in "${slots[@]}"; do
            cell=$(rp_cell_re "$slot")
            f="$out/$e-$slot.bit"
            has "^write_bitstream (-force )?-cell $cell [^ ]*/$(re_quote "$e-$slot")\.bit$" "a partial image of $e for $slot"
            if [ ! -f "$f" ]; then problem "no partial image $f in the catalog"; continue; fi
            grep -q "PARTIAL=TRUE" "$f" || problem "$(basename "$f")'s header lacks PARTIAL=TRUE"
            holds "$f" "$slot" "$e" || problem "$(basename "$f") was not written with engine $e (its ENGINE) in $slot: $(grep '^cell ' "$f")"
        done
        f="$out/$e-full.bit"
        has "^write_bitstream (-force )?-no_partial_bitfile [^ ]*/$(re_quote "$e")-full\.bit$" "a full image of $e"
        if [ ! -f "$f" ]; then problem "no full image $f in the catalog"; continue; fi
        if grep -q "PARTIAL=TRUE" "$f"; then problem "$(basename "$f") says PARTIAL=TRUE"; fi
        holds "$f" "${slots[0]}" "$e" \
            || problem "$(basename "$f") does not hold engine $e in ${slots[0]}: $(grep '^cell ' "$f")"
        # The rotation: engine i's configuration has engine i+1 (wrapping)
        # in slot1, so that slot1 meets another engine's slot0 in pr_verify.
        for ((next = 0; next < ${#list[@]}; next++)); do [ "${list[$next]}" = "$e" ] && break; done
        next=${list[$(((next + 1) % ${#list[@]}))]}
        holds "$f" "${slots[1]}" "$next" \
            || problem "engine $e's full image holds $(grep -F "cell $(rp_cell "${slots[1]}") " "$f" | cut -d' ' -f3-) in ${slots[1]}, not engine $next (configuration i holds engine i+1 there)"
    done
    # The grey box's partial images: blank slots, kept out of the catalog.
    for slot in "${slots[@]}"; do
        cell=$(rp_cell_re "$slot")
        f="$work/bit/blank-$slot.bit"
        has "^write_bitstream (-force )?-cell $cell [^ ]*/blank-$slot\.bit$" "the grey box's partial image for $slot"
        if [ ! -f "$f" ]; then problem "no grey-box image $f"; continue; fi
        grep -q "PARTIAL=TRUE" "$f" || problem "$(basename "$f")'s header lacks PARTIAL=TRUE"
        grep -qx "cell $(rp_cell "$slot") buffered" "$f" || problem "$(basename "$f") is not the grey box's: $(grep '^cell ' "$f")"
        [ ! -e "$out/blank-$slot.bit" ] || problem "blank-$slot.bit is in the catalog, which lists engines only"
    done
    has "^set_property BITSTREAM.CONFIG.USERID $iface " "UserID set to the interface id $iface"
    for f in "$out"/*.bit "$work"/bit/*.bit; do
        [ -f "$f" ] || continue
        grep -q ";UserID=$iface_upper;" "$f" || problem "$(basename "$f")'s UserID is not $iface_upper: $(grep '^a ' "$f")"
    done
    has "^write_cfgmem .*-format BIN -interface SMAPx32 -disablebitswap -loadbit \{up 0x0 [^ ]*-full\.bit\} -file [^ ]*/shell/shell\.bin$" \
        "the shell's .bin for the FPGA manager, from a full image"
    [ -f "$out/shell/shell.bin" ] || problem "no shell/shell.bin in the catalog"
    if command -v dtc >/dev/null; then
        [ -f "$out/shell/shell.dtbo" ] || problem "no shell/shell.dtbo in the catalog"
    fi
}

# The PS side against the board's device tree: the register windows'
# addresses and the interrupt; and each slot's engine's own HP port.
check_block_design() {
    local dt addr i port irq pin ewidth
    dt=$(device_tree "$board")
    ewidth=$(sed -n 's/.*\[\([0-9]*\):0\] *S_AXI_E0_wdata,.*/\1/p' rtl/lint/fabric_ps.v)
    ewidth=$((ewidth + 1))
    addr=$(sed -n 's/.*fabric-shell@\([0-9a-f]*\) {.*/\1/p' <<< "$dt")
    has "^assign_bd_address -offset 0x0*${addr^^} -range 4K .* /M_AXI_SHELL/Reg$" \
        "the shell's window at 0x$addr (the device tree's fabric-shell@$addr)"
    for i in 0 1; do
        addr=$(sed -n "s/.*slot${i}_decoupler: pr-decoupler@\([0-9a-f]*\) {.*/\1/p" <<< "$dt")
        port=M_AXI_DCP$i
        has "^assign_bd_address -offset 0x0*${addr^^} -range 4K .* /$port/Reg$" \
            "slot $i's decoupler at 0x$addr (the device tree's pr-decoupler@$addr)"
        # Slot i's engine reads its table through HP(i+1), HP0 being the shell's.
        has "^create_bd_intf_port -mode Slave .* S_AXI_E$i$" "slot $i's engine's port S_AXI_E$i"
        has "^connect_bd_intf_net /[^ ]*/M00_AXI /ps/S_AXI_HP$((i + 1))(_FPD)?$" \
            "slot $i's engine's port reaches the PS's S_AXI_HP$((i + 1))"
        has "^assign_bd_address -target_address_space /S_AXI_E$i " "slot $i's engine's port has DDR in its address space"
        # Reads and writes (a transformer writes its keys and values), as
        # wide as fabric_ps's ports, which fabric_top drives.
        has "^set_property -dict \{[^}]*CONFIG\.READ_WRITE_MODE READ_WRITE [^}]*CONFIG\.DATA_WIDTH $ewidth [^}]*\} /S_AXI_E$i$" \
            "slot $i's engine's port S_AXI_E$i reads and writes, $ewidth bits (rtl/lint/fabric_ps.v's)"
    done
    irq=$(sed -n 's/.*interrupts = <0 \([0-9]*\) 4>;.*/\1/p' <<< "$dt" | head -n1)
    case "$irq" in
        89) pin=ps/pl_ps_irq0 ;;  # Zynq UltraScale+: PL-to-PS IRQ0[0] is SPI 89
        29) pin=ps/IRQ_F2P ;;     # Zynq-7000: IRQ_F2P[0] is SPI 29 (UG585, table 7-4)
        *) problem "the device tree's interrupt SPI $irq is not one this test knows"; pin="" ;;
    esac
    [ -z "$pin" ] || has "^connect_bd_net /irq /$pin$" "the shell's interrupt to $pin (SPI $irq)"
    local mhz
    mhz=$(sed -n 's/^synth_design -top fabric_top .*-generic CLK_MHZ=\([0-9]*\).*/\1/p' "$log")
    has "(PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ|PCW_FPGA0_PERIPHERAL_FREQMHZ) ${mhz:-none}( |$)" \
        "the PS's fabric clock at the shell's CLK_MHZ ($mhz)"
}

# The manifest against the images, the source catalog and the daemon's
# reading of it (Manifest::parse in firmware/fabricd/src/catalog/mod.rs).
check_manifest() {
    local part=$1 report
    report=$(python3 - "$out" "$part" "$engines" "$models" "$src" <<'PY'
import hashlib, pathlib, re, sys, tomllib
out, part, src = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[5])
engines, models = sys.argv[3].split(), sys.argv[4].split()
sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
name_ok = lambda n: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", n) and ".." not in n and len(n) <= 64
plain = lambda f: f not in ("", ".", "..") and not any(c in f for c in "/\\\0")
source = tomllib.loads((src / "manifest.toml").read_text())
s_engines = {e["name"]: e for e in source.get("engine", [])}
s_models = {m["name"]: m for m in source.get("model", [])}
text = (out / "manifest.toml").read_text()
if "scripts/build-bitstreams" not in text.splitlines()[0]:
    print("its first line does not name scripts/build-bitstreams (the script would not replace it)")
try:
    m = tomllib.loads(text)
except Exception as e:
    print(f"manifest.toml does not parse: {e}"); sys.exit()
if m.get("version") != 2: print(f"manifest version {m.get('version')}, not 2")
if m.get("shell") != source["shell"]: print(f"[shell] is {m.get('shell')}, the source's {source['shell']}")
names = [e["name"] for e in m.get("engine", [])]
if names != engines: print(f"the manifest lists engines {names}, the build {engines}")
listed = {"manifest.toml"}
for e in m.get("engine", []):
    n = e["name"]
    if not name_ok(n): print(f"engine name {n!r} is not one the daemon takes")
    s = s_engines.get(n, {})
    for key in ("kind", "version", "description"):
        if e.get(key) != s.get(key): print(f"engine {n}: {key} {e.get(key)!r}, the source manifest's {s.get(key)!r}")
    engine_id = s.get("version", 0) << 16 | s.get("kind", 0)
    # Partial images by slot, then the full one; the full one holds the
    # engine in slot 0, and in slot 1 too when it is the only engine.
    full = [0, 1] if len(engines) == 1 else [0]
    want = [("partial", [0], f"{n}-slot0.bit"), ("partial", [1], f"{n}-slot1.bit"), ("full", full, f"{n}-full.bit")]
    got = [(i.get("kind"), i.get("slots"), i.get("file")) for i in e.get("image", [])]
    if got != want: print(f"engine {n}: images {got}, expected {want}")
    for i in e.get("image", []):
        f = out / i["file"]
        listed.add(i["file"])
        if not plain(i["file"]): print(f"{n}: {i['file']} is not a plain file name")
        if not f.is_file(): print(f"{n}: {i['file']} is listed but missing"); continue
        if sha(f) != i["sha256"]: print(f"{n}: {i['file']}: sha256 {i['sha256']} is not the file's {sha(f)}")
        if i["part"] != part: print(f"{n}: {i['file']}: part {i['part']}, the board's is {part}")
        body = f.read_text()
        kind = "partial" if "PARTIAL=TRUE" in body else "full"
        if kind != i["kind"]: print(f"{n}: {i['file']} is listed {i['kind']} but its header says {kind}")
        for slot in i["slots"]:
            if not re.search(rf"^cell slot{slot}\.rm module rm_{re.escape(n)}\.dcp ENGINE={engine_id}( |$)", body, re.M):
                print(f"{n}: {i['file']} is listed for slot {slot} but does not hold the engine there")
names = [x["name"] for x in m.get("model", [])]
if names != models: print(f"the manifest lists models {names}, the build {models}")
for x in m.get("model", []):
    n = x["name"]
    s = s_models.get(n, {})
    if not name_ok(n): print(f"model name {n!r} is not one the daemon takes")
    for key in ("engine", "description", "table", "table_sha256", "table_crc", "identity",
                "tokenizer", "tokenizer_sha256"):
        if x.get(key) != s.get(key): print(f"model {n}: {key} {x.get(key)!r}, the source manifest's {s.get(key)!r}")
    if x.get("engine") not in engines: print(f"model {n} runs on {x.get('engine')}, which the catalog does not have")
    for key in ("table", "tokenizer"):
        f = x.get(key, "")
        listed.add(f)
        if not plain(f) or not (out / f).is_file(): print(f"model {n}: its {key} {f!r} is not in the catalog"); continue
        if sha(out / f) != x.get(f"{key}_sha256"): print(f"model {n}: {f}'s sha256 is not {key}_sha256")
        if sha(out / f) != sha(src / f): print(f"model {n}: {f} is not the source catalog's")
for f in out.iterdir():
    if f.is_file() and f.name not in listed: print(f"{f.name} is in the catalog but not in the manifest")
PY
)
    while IFS= read -r line; do [ -z "$line" ] || problem "manifest: $line"; done <<< "$report"
}

# check_all BOARD: every check against the last run ($log, $out, $work,
# $src, $engines, $models).
check_all() {
    board=$1
    local part
    part=$(board_part "$board")
    check_part "$part"
    check_synthesis
    check_implementation "$board"
    check_verify
    check_images
    check_block_design
    check_manifest "$part"
}

report() { # WHAT: ok if no problems, else one FAIL line each
    if [ ${#problems[@]} -eq 0 ]; then
        echo "ok: $1"; passed=$((passed + 1))
    else
        for p in "${problems[@]}"; do echo "FAIL: $1: $p"; done
        failures=$((failures + 1))
    fi
    problems=()
}

# run_and_check WHAT BOARD [-- ARG...]: a good run, every check reported.
run_and_check() {
    local what=$1 check
    board=$2
    shift 2
    run_flow "good-$what" "$board" "" "$@"
    if [ "$status" -ne 0 ]; then
        echo "FAIL: $what: build-bitstreams failed ($status):"; echo "$output"; failures=$((failures + 1)); return
    fi
    for check in part synthesis implementation verify images block_design manifest; do
        case $check in
            part|manifest) "check_$check" "$(board_part "$board")" ;;
            implementation) check_implementation "$board" ;;
            *) "check_$check" ;;
        esac
        report "$what: $check ($(wc -l < "$log") calls; engines $engines; models $models)"
    done
}

# ---- the flow, for each board -------------------------------------------------
for b in kv260 zed; do
    run_and_check "$b" "$b"
done

# Two engines: the rotation (engine i in slot0 and i+1 in slot1 of
# configuration i), each full image for slot 0 only. The second engine is
# the first's RTL under another ENGINE value: a fixture, not an engine.
cp -r bitstreams "$tmp/two"
rm -rf "$tmp/two/kv260" "$tmp/two/zed"
cat >> "$tmp/two/manifest.toml" <<EOF

[[engine]]
name = "trigram-x"
description = "a second engine for tests/vivado-flow.sh"
kind = 1
version = 3

[[engine.image]]
file = "trigram-v2.bit"
sha256 = "$(sha256sum bitstreams/trigram-v2.bit | cut -d' ' -f1)"
part = "xck26-sfvc784-2LV-c"
slots = [0, 1]
kind = "partial"

[[model]]
name = "kjv-x"
description = "kjv on the second engine"
engine = "trigram-x"
table = "kjv.ftb"
table_sha256 = "$(sha256sum bitstreams/kjv.ftb | cut -d' ' -f1)"
table_crc = 0x01234567
identity = "$(printf '%064d' 7)"
tokenizer = "kjv.tok"
tokenizer_sha256 = "$(sha256sum bitstreams/kjv.tok | cut -d' ' -f1)"
EOF
run_and_check two-engines kv260 -- --from "$tmp/two" --engines "trigram-v2 trigram-x"
# --models: a choice of the source's models, in the order given.
run_and_check models zed -- --from "$tmp/two" --engines "trigram-x trigram-v2" --models "kjv-x fortunes"

# A source catalog with the transformer first: slot0 holds it in the first
# configuration, whose static every other is implemented on.
run_and_check transformer kv260 -- --engines "transformer-v1 trigram-v2"

# With Yosys, what the stubs take on trust. The slot's black box (generated
# from rtl/slot/fabric_slot.v) and the transformer's wrapper (fabric_slot_lm
# under fabric_slot's name) have fabric_slot's parameters and ports,
# directions and widths, the wrapper fabric_slot_lm's own ENGINE; every
# module of rtl/slot that implements an engine kind has fabric_slot's ports
# (a partition's modules have its ports: UG909); the flow's module for each
# kind is the one whose default ENGINE is of that kind, and each board's
# engines are what those modules implement (ENGINE its default); and
# fabric_top has the cells the flow reads modules into, fabric_slot's in
# the default and fabric_slot_lm's in the same cell when SLOT0_MODULE
# chooses the transformer.
stub_v="$tmp/good-kv260/kv260/work/gen/fabric_slot_black_box.v"
wrap_v="$tmp/good-transformer/kv260/work/gen/fabric_slot_lm_as_fabric_slot.v"
# yosys_check WHAT PYTHON [ARG...]: PYTHON prints what is wrong, nothing if
# nothing is.
yosys_check() {
    local what=$1 code=$2 said
    shift 2
    said=$(python3 -c "$code" "$@" 2>&1)
    if [ -z "$said" ]; then
        echo "ok: $what (Yosys)"; passed=$((passed + 1))
    else
        echo "FAIL: $what: $said"; failures=$((failures + 1))
    fi
}
if ! command -v yosys >/dev/null; then
    echo "SKIP: no yosys: the slot's black box, the transformer's wrapper and fabric_top's cells are not checked"
elif [ ! -f "$stub_v" ] || [ ! -f "$wrap_v" ]; then
    echo "FAIL: the flow wrote no $stub_v or no $wrap_v"; failures=$((failures + 1))
else
    # flow_tcl SCRIPT: SCRIPT's output, run after the flow's plain Tcl.
    flow_tcl() { tclsh <(printf 'source %s\n%s\n' "$repo/rtl/vivado/lib/flow_lib.tcl" "$1"); }
    # default_engine MODULE: MODULE's default ENGINE (decimal), as Yosys read it.
    default_engine() {
        [ -f "$tmp/$1.json" ] || return 0
        python3 -c "import json, sys; print(int(json.load(open(sys.argv[1]))['modules'][sys.argv[2]]['parameter_default_values']['ENGINE'], 2))" \
            "$tmp/$1.json" "$1" 2>/dev/null || true
    }
    # The flow's modules by engine kind.
    # shellcheck disable=SC2016 # Tcl, not the shell's
    flow_kinds=$(flow_tcl 'dict for {k m} $fabric::rm_modules { puts "$k $m" }')
    yosys -q -p "read_verilog $stub_v; write_json $tmp/bb.json"
    yosys -q -p "read_verilog -lib $wrap_v; write_json $tmp/wrap.json"
    for m in fabric_slot fabric_slot_lm $(awk '{ print $2 }' <<< "$flow_kinds"); do
        [ -f "$tmp/$m.json" ] || [ ! -f "rtl/slot/$m.v" ] \
            || yosys -q -p "read_verilog -lib rtl/slot/$m.v; write_json $tmp/$m.json"
    done
    shape='
import json, sys
def module(f, name="fabric_slot"): return json.load(open(f))["modules"][name]
def ports(m): return {k: (v["direction"], len(v["bits"])) for k, v in m["ports"].items()}
def shape(m): return (ports(m), sorted(m.get("parameter_default_values", {})))
def engine(m): return int(m["parameter_default_values"]["ENGINE"], 2)
'
    yosys_check "the slot's black box has fabric_slot's parameters and ports" "$shape
bb, slot = module(sys.argv[1]), module(sys.argv[2])
if 'black_box' not in bb.get('attributes', {}): print('it has no (* black_box *)')
if shape(bb) != shape(slot): print(f'{shape(bb)} is not the module\'s {shape(slot)}')" "$tmp/bb.json" "$tmp/fabric_slot.json"
    yosys_check "the transformer's wrapper has fabric_slot's parameters and ports, and fabric_slot_lm's ENGINE" "$shape
w, slot, lm = module(sys.argv[1]), module(sys.argv[2]), module(sys.argv[3], 'fabric_slot_lm')
if shape(w) != shape(slot): print(f'{shape(w)} is not fabric_slot\'s {shape(slot)}')
if engine(w) != engine(lm): print(f'its ENGINE is {engine(w)}, fabric_slot_lm\'s {engine(lm)}')" \
        "$tmp/wrap.json" "$tmp/fabric_slot.json" "$tmp/fabric_slot_lm.json"
    while read -r _ m; do
        [ "$m" != fabric_slot ] || continue
        yosys_check "$m has fabric_slot's ports (a partition's modules have its ports)" "$shape
slot, other = module(sys.argv[1]), module(sys.argv[2], sys.argv[3])
if ports(other) != ports(slot): print(f'{ports(other)} is not fabric_slot\'s {ports(slot)}')" \
            "$tmp/fabric_slot.json" "$tmp/$m.json" "$m"
    done <<< "$flow_kinds"

    # The flow's table against the modules' own ENGINE, and the boards'.
    while read -r kind m; do
        rtl=$(default_engine "$m")
        if [ -n "$rtl" ] && [ $((rtl & 0xffff)) -eq "$kind" ] && [ "$(rtl_module_of_kind "$kind")" = "$m" ]; then
            echo "ok: the flow synthesizes engines of kind $kind from $m (ENGINE=$rtl)"; passed=$((passed + 1))
        else
            echo "FAIL: the flow synthesizes engines of kind $kind from $m, whose default ENGINE is ${rtl:-unknown}"
            failures=$((failures + 1))
        fi
    done <<< "$flow_kinds"
    for b in kv260 zed; do
        for e in $(board_engines "$b"); do
            id=$(source_query bitstreams engine-id "$e")
            m=$(awk -v k="$(source_query bitstreams engine-kind "$e")" '$1 == k { print $2 }' <<< "$flow_kinds")
            rtl=$(default_engine "${m:-none}")
            if [ -n "$rtl" ] && [ "$id" = "$rtl" ]; then
                echo "ok: $b's engine $e (ENGINE=$id) is the one rtl/slot/$m.v implements"; passed=$((passed + 1))
            else
                echo "FAIL: $b's engine $e is ENGINE=${id:-unknown}, its module ${m:-(none)}'s default is ${rtl:-unknown}: the bitstream would claim an engine it is not"
                failures=$((failures + 1))
            fi
        done
    done

    # fabric_top's cells, with its defaults and with a transformer in slot0,
    # against the cells the flow names.
    # shellcheck disable=SC2016 # Tcl, not the shell's
    flow_cells=$(flow_tcl 'foreach s $fabric::slots { puts "$s [fabric::rp_cell $s]" }')
    for slot in "${slots[@]}"; do
        grep -qx "$slot $(rp_cell "$slot")" <<< "$flow_cells" \
            || { echo "FAIL: the flow names $slot's cell otherwise than this test: $flow_cells"; failures=$((failures + 1)); }
    done
    for chosen in "" "-set SLOT0_MODULE 2"; do
        yosys -q -p "read_verilog -lib rtl/lint/fabric_ps.v; read_verilog -I rtl/common -I rtl/shell -I rtl/engine rtl/top/fabric_top.v rtl/common/*.v rtl/shell/*.v rtl/slot/*.v rtl/engine/*.v rtl/engine/lm/*.v; ${chosen:+chparam $chosen fabric_top;} hierarchy -check -top fabric_top; rename -top fabric_top; select fabric_top; write_rtlil -selected $tmp/top.il" >/dev/null 2>&1 \
            || { echo "FAIL: Yosys does not elaborate fabric_top ${chosen:-with its defaults}"; failures=$((failures + 1)); continue; }
        want="$(rp_cell slot0) fabric_slot"
        [ -z "$chosen" ] || want="$(rp_cell slot0) fabric_slot_lm"
        yosys_check "fabric_top ${chosen:-with its defaults} has the flow's cells ($want, slot1.rm fabric_slot)" '
import re, sys
cells = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*cell (\S+) \\(\S+)$", line)
    if m: cells[m.group(2)] = m.group(1).split("\\")[1]
want = dict(zip(sys.argv[2].split()[::2], sys.argv[2].split()[1::2]))
got = {c: cells.get(c) for c in want}
if got != want: print(f"its cells {got} are not {want}: the flow would not find the partitions")
rest = [c for c, m in cells.items() if m.startswith("fabric_slot") and c not in want]
if rest: print(f"more slot cells than the flow names: {rest}")' "$tmp/top.il" "$want $(rp_cell slot1) fabric_slot"
    done
fi

# ---- the flow's arguments and configurations (lib/flow_lib.tcl, for real) ------
cat > "$tmp/flow-args.tcl" <<'TCL'
source [file join [lindex $argv 0] rtl vivado lib flow_lib.tcl]
set base {--board kv260 --work w --out o --interface-id 0x5EED0002}
if {[catch {fabric::parse_args [concat $base [lrange $argv 1 end]]} a]} { puts "refused: $a"; exit }
foreach e [dict get $a engines] { lassign $e n k v; puts "engine $n ENGINE=[fabric::engine_generic $k $v]" }
foreach c [fabric::configurations [dict get $a engines]] { puts "config [dict get $c name] [dict get $c slots]" }
TCL
flow_args() { # EXPECT ARG...: fabric::parse_args on the ARGs says EXPECT
    local want=$1 said
    shift
    said=$(tclsh "$tmp/flow-args.tcl" "$repo" "$@" 2>&1)
    if grep -qF -- "$want" <<< "$said"; then
        echo "ok: flow $*: $(grep -m1 -F -- "$want" <<< "$said")"; passed=$((passed + 1))
    else
        echo "FAIL: flow $*: expected '$want', got: $said"; failures=$((failures + 1))
    fi
}
flow_args "engine trigram-v2 ENGINE=131073" --engine trigram-v2 1 2
flow_args "config config1_a_b slot0 a slot1 b" --engine a 1 2 --engine b 1 3
flow_args "config config2_b_a slot0 b slot1 a" --engine a 1 2 --engine b 1 3
flow_args "config grey_box slot0 {} slot1 {}" --engine a 1 2
flow_args "refused: flow: engine a given twice" --engine a 1 2 --engine a 1 3
flow_args "refused: flow: engines a and b are both kind 1 version 2" --engine a 1 2 --engine b 1 2
flow_args "refused: flow: engine a: KIND '0' is not a decimal number from 1 to 65535" --engine a 0 2
flow_args "refused: flow: engine a: VERSION '65536' is not" --engine a 1 65536
flow_args "refused: flow: engine a: no RTL implements engine kind 3" --engine a 3 1
flow_args "refused: flow: engine a: VERSION '0x2' is not" --engine a 1 0x2
flow_args "refused: flow: engine a: KIND '01' is not" --engine a 01 2
flow_args "refused: flow: engine name '../a' is not a plain name" --engine ../a 1 2
flow_args "refused: flow: --engine needs NAME KIND VERSION" --engine a 1
flow_args "refused: flow: no --engine given"
flow_args "refused: flow: unknown argument '--model'" --model kjv kjv.hex 432811

# ---- broken flows: each must fail, and say why --------------------------------
# mutant NAME FILE SED EXPECT [ARG...]: a copy of rtl/vivado with SED
# applied to FILE, run for the KV260 with build-bitstreams ARGs; the run or
# the checks must fail with a message matching EXPECT.
mutant() {
    local name=$1 file=$2 script=$3 expect=$4 flow="$tmp/mutants/$1"
    shift 4
    mkdir -p "$tmp/mutants"
    cp -r rtl/vivado "$flow"
    sed -i -e "$script" "$flow/$file"
    if cmp -s "rtl/vivado/$file" "$flow/$file"; then
        echo "FAIL: mutant $name no longer applies to rtl/vivado/$file: update tests/vivado-flow.sh"
        failures=$((failures + 1)); return
    fi
    run_flow "mutant-$name" kv260 "$flow" -- "$@"
    local said
    if [ "$status" -ne 0 ]; then
        # The error, not the progress lines (which name the mutant's paths).
        said=$(grep -E 'ERROR|build-bitstreams: .*(no |not |refuse)' <<< "$output" || echo "$output")
    else
        check_all kv260
        said=$(printf '%s\n' "${problems[@]}")
        problems=()
    fi
    if [ -z "$said" ]; then
        echo "FAIL: mutant $name: the broken flow passed every check"; failures=$((failures + 1))
    elif ! grep -qiE -- "$expect" <<< "$said"; then
        echo "FAIL: mutant $name failed, but not saying /$expect/: $said"; failures=$((failures + 1))
    else
        echo "ok: mutant $name is caught: $(grep -iE -m1 -- "$expect" <<< "$said")"; passed=$((passed + 1))
    fi
}
mutant pr-verify-last flow.tcl 's/implement verify bitstreams}/implement bitstreams verify}/' \
    'pr_verify runs before any bitstream'
mutant no-lock flow.tcl '/^ *lock_design -level routing$/d' 'locked with lock_design|never locked'
mutant not-reconfigurable flow.tcl '/set_property HD.RECONFIGURABLE true/d' 'HD.RECONFIGURABLE|no reconfigurable cell'
mutant no-userid flow.tcl '/BITSTREAM.CONFIG.USERID/d' 'UserID'
# shellcheck disable=SC2016 # $src and $stub are the flow's Tcl, not the shell's
mutant slot-not-black-box flow.tcl 's/\[concat \[dict get \$src static\] \[list \$stub\]\]/[concat [dict get $src static] [dict get $src rm]]/' \
    'black box'
# shellcheck disable=SC2016
mutant pblocks-after-place flow.tcl '/read_xdc \[file join \$dir xdc pblocks_/d; s/^\( *\)place_design$/&\n\1read_xdc [file join $::fabric_flow_dir xdc pblocks_[dict get $::fabric::board name].xdc]/' \
    'has no Pblock|Pblocks are read before'
mutant unstubbed-command flow.tcl 's/^\( *\)report_route_status \(.*\)$/&\n\1report_power \2/' \
    "'report_power' is not stubbed"
# shellcheck disable=SC2016
mutant no-engine-generic flow.tcl 's/ -generic ENGINE=\$id//' 'not synthesized out of context with ENGINE='
# shellcheck disable=SC2016
mutant engine-generic-hex flow.tcl 's/-generic ENGINE=\$id/-generic ENGINE=[format 0x%08X $id]/' \
    'ENGINE=0x00020001 is not a decimal integer'
# With both engines, each swapped id is the other's: the run with the
# trigram engine's ENGINE is then the transformer's module.
# shellcheck disable=SC2016
mutant engine-kind-version-swapped lib/flow_lib.tcl 's/(\$version << 16) | \$kind/($kind << 16) | $version/' \
    'not synthesized out of context with ENGINE=131073|trigram-v2.s slot is not synthesized from fabric_slot'
# The transformer synthesized under its own module name: not the
# partition's black box (UG909).
# shellcheck disable=SC2016
mutant rm-own-name flow.tcl 's/-mode out_of_context -top \$rp_module /-mode out_of_context -top $module /' \
    "top is fabric_slot_lm, cell slot[01]\\.rm is a black box of fabric_slot"
# The flow as it was: every engine from fabric_slot.
mutant transformer-as-trigram lib/flow_lib.tcl 's/rm_modules {1 fabric_slot 2 fabric_slot_lm}/rm_modules {1 fabric_slot 2 fabric_slot}/' \
    "transformer-v1's slot \(fabric_slot_lm\) is synthesized without its wrapper"
# The wrapper beside fabric_slot.v, two modules of one name.
# shellcheck disable=SC2016
mutant wrapper-beside-own lib/flow_lib.tcl 's/if {\[file normalize \$file\] ne \$own} { lappend files \$file }/lappend files $file/' \
    'reads rtl/slot/fabric_slot.v too'
# shellcheck disable=SC2016
mutant engine-without-daw flow.tcl 's/\(-generic ENGINE=\$id\) -generic DAW=\[dict get \$board dma_addr_bits\]$/\1/' \
    'ports are not the partition'
mutant no-grey-box lib/flow_lib.tcl '/lappend configs \[dict create name grey_box/d' \
    'two configurations or more|grey box'
# shellcheck disable=SC2016
mutant no-rotation lib/flow_lib.tcl 's/(\$i + \$k) % \$n/$i % $n/' \
    'full image holds .* in slot1, not' --from "$tmp/two" --engines "trigram-v2 trigram-x"
# shellcheck disable=SC2016
mutant full-in-both-slots flow.tcl 's/\[list full \$engine \[join \$holding ,\] \$file\]/[list full $engine 0,1 $file]/' \
    'is listed for slot 1 but does not hold the engine' --from "$tmp/two" --engines "trigram-v2 trigram-x"

# ---- build-bitstreams' refusals -------------------------------------------------
shown() { # CMD...: without env and its assignments, the paths short
    local w words=()
    for w in "$@"; do
        [[ "$w" == env || "$w" =~ ^[A-Z_]+= ]] && continue
        words+=("${w#"$tmp"/}")
    done
    echo "${words[*]}"
}
expect() { # STATUS MESSAGE CMD...: CMD exits STATUS and says MESSAGE
    local want=$1 message=$2 got said
    shift 2
    set +e
    said=$("$@" 2>&1 < /dev/null)
    got=$?
    set -e
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $(shown "$@"): exit $got, expected $want: $said"; failures=$((failures + 1))
    elif ! grep -q -- "$message" <<< "$said"; then
        echo "FAIL: $(shown "$@"): output lacks '$message': $said"; failures=$((failures + 1))
    else
        echo "ok: $(shown "$@") -> $got, $(grep -m1 -- "$message" <<< "$said")"; passed=$((passed + 1))
    fi
}
# refused STATUS MESSAGE ARG...: build-bitstreams with the fake vivado
# exits STATUS saying MESSAGE, and Vivado never ran.
refused() {
    local want=$1 message=$2
    shift 2
    : > "$tmp/refused.log"
    rm -rf "$tmp/refused-out" "$tmp/refused-work"
    expect "$want" "$message" env PATH="$repo/tests/vivado:$PATH" VIVADO_STUB_LOG="$tmp/refused.log" \
        scripts/build-bitstreams --rtl "$tmp/rtl" --out "$tmp/refused-out" --work "$tmp/refused-work" "$@"
    if [ -s "$tmp/refused.log" ]; then
        echo "FAIL: Vivado ran for build-bitstreams $(shown "$@")"; failures=$((failures + 1))
    fi
}
expect 0 "Usage" scripts/build-bitstreams --help
expect 2 "unknown option" scripts/build-bitstreams --no-such-option
expect 2 "no board 'vc707'" env PATH="$repo/tests/vivado:$PATH" scripts/build-bitstreams vc707
expect 2 "one board" env PATH="$repo/tests/vivado:$PATH" scripts/build-bitstreams --out "$tmp/x" kv260 zed
if ! command -v vivado >/dev/null; then
    expect 1 "vivado not found" scripts/build-bitstreams kv260
fi
mkdir -p "$tmp/foreign" && touch "$tmp/foreign/notes.txt"
expect 2 "did not write" env PATH="$repo/tests/vivado:$PATH" \
    VIVADO_STUB_LOG="$tmp/refused.log" scripts/build-bitstreams --out "$tmp/foreign" --work "$tmp/w1" kv260
refused 1 "engine 'no-such-engine' is not in .*(engines: trigram-v2, transformer-v1)" --engines no-such-engine kv260
refused 1 "model 'nope' is not in .*(models: kjv, fortunes, kjv-lm)" --models nope zed
refused 1 "model kjv-x runs on engine trigram-x, which this build does not make" --from "$tmp/two" --models "kjv-x" kv260
# A table larger than a slot's region: (16 MiB, udmabuf-fabric's size in
# either board's device tree, less 1 MiB) / 2 = 7864320 bytes.
cp -r bitstreams "$tmp/big"
rm -rf "$tmp/big/kv260" "$tmp/big/zed"
truncate -s 8M "$tmp/big/big.ftb"
cat >> "$tmp/big/manifest.toml" <<EOF

[[model]]
name = "big"
engine = "trigram-v2"
table = "big.ftb"
table_sha256 = "$(sha256sum "$tmp/big/big.ftb" | cut -d' ' -f1)"
table_crc = 0x00000000
identity = "$(printf '%064d' 0)"
tokenizer = "fortunes.tok"
tokenizer_sha256 = "$(sha256sum bitstreams/fortunes.tok | cut -d' ' -f1)"
EOF
for b in kv260 zed; do
    refused 1 "model big: its table big.ftb is 8388608 bytes, .* 7864320 bytes" --from "$tmp/big" "$b"
done
run_flow skip-fit zed "" -- --from "$tmp/big" --models big --skip-fit-check
if [ "$status" -eq 0 ] && [ -f "$out/big.ftb" ]; then
    echo "ok: --skip-fit-check runs Vivado for a table larger than a slot's region"; passed=$((passed + 1))
else
    echo "FAIL: --skip-fit-check did not build the catalog ($status): $output"; failures=$((failures + 1))
fi
# The source catalog as the daemon would refuse it, or its files not as it says.
cp -r bitstreams "$tmp/tampered"
printf 'x' >> "$tmp/tampered/kjv.tok"
refused 1 "model kjv: .*/kjv.tok has sha256 [0-9a-f]*, .* says" --from "$tmp/tampered" kv260
cp -r bitstreams "$tmp/v1"
sed -i 's/^version = 2$/version = 1/' "$tmp/v1/manifest.toml"
refused 1 "manifest.toml: version 1, not 2" --from "$tmp/v1" zed
run_flow timing kv260 "" VIVADO_STUB_SLACK=-0.250
if [ "$status" -ne 0 ] && grep -q "misses setup timing" <<< "$output"; then
    echo "ok: a configuration that misses timing stops the flow"; passed=$((passed + 1))
else
    echo "FAIL: a configuration with negative slack did not stop the flow ($status): $output"; failures=$((failures + 1))
fi

# ---- the out-of-context timing script (rtl/vivado/timing.tcl) -------------
# run_timing NAME BOARD [SCRIPT] [ENV=VALUE...]: the fake vivado on the
# timing script; sets $log, $status and $output.
run_timing() {
    local name=$1 board=$2 script=${3:-$repo/rtl/vivado/timing.tcl}
    shift 3 || shift $#
    local dir="$tmp/timing-$name/$board"
    mkdir -p "$dir"
    log="$dir/calls.log"
    : > "$log"
    set +e
    output=$(env PATH="$repo/tests/vivado:$PATH" VIVADO_STUB_LOG="$log" "$@" \
        vivado -mode batch -source "$script" -tclargs --board "$board" --rtl "$tmp/rtl" \
        --work "$dir/work" 2>&1)
    status=$?
    set -e
    timing_tsv="$dir/work/timing.tsv"
}
# check_timing BOARD: each part alone, out of context, in the board's part,
# its clock at the board's period before placement, timing and the logic
# levels reported after routing, a line each in timing.tsv.
check_timing() {
    local board=$1 part period module n
    part=$(board_part "$board")
    period=$(awk -v m="$(sed -n 's/^dict set ::fabric::board clk_mhz //p' "rtl/vivado/boards/$board.tcl")" \
        'BEGIN { printf "%.3f", 1000 / m }')
    problems=()
    [ "$status" -eq 0 ] || problem "the timing script failed ($status): $output"
    n=0
    for module in fabric_shell fabric_decoupler fabric_slot fabric_slot_lm; do
        n=$((n + 1))
        local synth clock place route report levels
        synth=$(nth "^synth_design -mode out_of_context -top $module -part $part " 1)
        [ -n "$synth" ] || { problem "$module not synthesized out of context for $part"; continue; }
        clock=$(all "^create_clock -period $period -name clk clk$" | sed -n "${n}p")
        place=$(all "^place_design" | sed -n "${n}p")
        route=$(all "^route_design" | sed -n "${n}p")
        report=$(all "^report_timing_summary -file .*/[a-z_]*_timing\.rpt$" | sed -n "${n}p")
        levels=$(all "^report_design_analysis -logic_level_distribution -file " | sed -n "${n}p")
        if [ -z "$clock" ] || [ "$clock" -lt "$synth" ] || [ -z "$place" ] || [ "$clock" -gt "$place" ]; then
            problem "$module: no clock of $period ns between its synthesis and its placement"
        fi
        if [ -z "$route" ] || [ -z "$report" ] || [ "$report" -lt "$route" ] || [ -z "$levels" ] || [ "$levels" -lt "$route" ]; then
            problem "$module: its timing summary and logic levels are not reported after routing"
        fi
    done
    if grep -q "^read_verilog .*/top/" "$log"; then
        problem "a part read the board's top, which names the PS's block design"
    fi
    if [ ! -f "$timing_tsv" ] || [ "$(wc -l < "$timing_tsv")" -ne 5 ]; then
        problem "timing.tsv lacks a line a part: $(cat "$timing_tsv" 2>/dev/null)"
    fi
    if [ ${#problems[@]} -eq 0 ]; then
        echo "ok: the timing script measures each part out of context at $board's $period ns"; passed=$((passed + 1))
    else
        local IFS=';'
        echo "FAIL: the timing script on $board: ${problems[*]}"; failures=$((failures + 1))
    fi
}
for b in kv260 zed; do
    run_timing good "$b"
    check_timing "$b"
done
run_timing slack kv260 "" VIVADO_STUB_SLACK=-0.250
if [ "$status" -ne 0 ] && grep -q "shell misses setup timing at 5.000 ns .*shell_timing.rpt" <<< "$output"; then
    echo "ok: a part that misses timing fails the timing script, naming its report"; passed=$((passed + 1))
else
    echo "FAIL: a part with negative slack did not fail the timing script ($status): $output"; failures=$((failures + 1))
fi
# A copy that never constrains the clock must fail the checks.
cp -r rtl/vivado "$tmp/vivado-noclock"
sed -i '/create_clock/d' "$tmp/vivado-noclock/timing.tcl"
run_timing noclock kv260 "$tmp/vivado-noclock/timing.tcl"
check_timing kv260 > "$tmp/noclock.out" || true
if grep -q "^FAIL: .*no clock of 5.000 ns" "$tmp/noclock.out"; then
    echo "ok: a timing script without its clock is caught"; passed=$((passed + 1))
    failures=$((failures - 1))
else
    echo "FAIL: a timing script without its clock was not caught: $(cat "$tmp/noclock.out")"; failures=$((failures + 1))
fi

echo "vivado-flow: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
