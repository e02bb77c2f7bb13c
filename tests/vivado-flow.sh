#!/usr/bin/env bash
# The Vivado flow (rtl/vivado/, run by scripts/build-bitstreams) without
# Vivado: the flow runs under tclsh with every Vivado command stubbed
# (tests/vivado/stubs.tcl: each call logged, each refusal Vivado documents
# kept, any command not stubbed an error), for the KV260 and the ZedBoard,
# and the order of the logged calls is checked against UG909's DFX flow:
# the static synthesized before implementation with the slot a black box,
# every RP cell HD.RECONFIGURABLE before opt_design, each module read with
# read_checkpoint -cell, the Pblocks read before placement, the static
# locked before the second configuration, pr_verify over every
# configuration before any bitstream, a partial image for every (slot,
# model) pair and a full one per model, UserID the interface id, the
# board's part, the addresses and interrupt of the board's device tree, and
# a manifest whose files, hashes and parts are right. Then the checks are
# run against broken copies of the flow (each must fail, naming what is
# wrong), and build-bitstreams' refusals are checked.
#
# What this does not show: that Vivado accepts the flow. Nothing here has
# run on Vivado; see rtl/vivado/README.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
command -v tclsh >/dev/null || { echo "FAIL: tclsh not found (apt-get install tcl)"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passed=0
iface=$(sed -n 's/^interface_id = //p' bitstreams/manifest.toml)
iface_upper="0X$(tr 'a-f' 'A-F' <<< "${iface#0x}")"
rp_cells=(slot0 slot1)

# The RTL as the flow reads it: the real shell, engine and slot, and a
# stand-in board top (the stubs read no more of it than its module name).
mkdir -p "$tmp/rtl/top"
for d in shell engine slot; do ln -s "$repo/rtl/$d" "$tmp/rtl/$d"; done
printf '// stand-in for rtl/top/fabric_top.v: the Vivado stubs parse no Verilog\nmodule fabric_top;\nendmodule\n' \
    > "$tmp/rtl/top/fabric_top.v"

# A board's row of build-bitstreams' table: part, slot words, models.
board_part() { sed -n '/^BOARDS="/,/^"/p' scripts/build-bitstreams | awk -v b="$1" '$1 == b { print $2 }'; }
board_models() {
    sed -n '/^BOARDS="/,/^"/p' scripts/build-bitstreams \
        | awk -v b="$1" '$1 == b { for (i = 4; i <= NF; i++) printf "%s%s", $i, (i < NF ? " " : "") }'
}
# The board's device tree: its overlay and what it includes.
device_tree() {
    local dtso="device-tree/fabricd-shell-$1.dtso" inc
    cat "$dtso"
    sed -n 's|^/include/ "\(.*\)"|\1|p' "$dtso" | while read -r inc; do cat "device-tree/$inc"; done
}

# run_flow NAME BOARD [FLOW] [ENV=VALUE...]: build-bitstreams for BOARD with
# the fake vivado and mktable; sets $log, $out, $work, $status and $output.
run_flow() {
    local name=$1 board=$2 flow=${3:-$repo/rtl/vivado}
    shift 3 || shift $#
    local dir="$tmp/$name/$board"
    mkdir -p "$dir"
    log="$dir/calls.log" out="$dir/out" work="$dir/work"
    : > "$log"
    set +e
    output=$(env PATH="$repo/tests/vivado:$PATH" VIVADO_STUB_LOG="$log" \
        FABRIC_MKTABLE="$repo/tests/vivado/mktable" "$@" \
        scripts/build-bitstreams --rtl "$tmp/rtl" --flow "$flow" --out "$out" --work "$work" \
        "$board" 2>&1)
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

check_synthesis() {
    local models=$1 m words
    for m in $models; do
        words=$(wc -l < "$work/tables/$m.hex")
        has "^synth_design -mode out_of_context -top fabric_slot .*TABLE_HEX=\"[^\"]*/$m\.hex\".* -generic TABLE_WORDS=$words( |$)" \
            "model $m's slot synthesized out of context with its table of $words words"
    done
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
    local models=$1 board_name=$2 cell i m n pblock lock
    for cell in "${rp_cells[@]}"; do
        before "^set_property HD.RECONFIGURABLE (true|1) $cell$" "^opt_design" \
            "RP cell $cell is marked HD.RECONFIGURABLE before opt_design"
    done
    # Model i in slot0 and model i+1 in slot1 of configuration i: every
    # (slot, model) pair is read into its cell once.
    for m in $models; do
        for cell in "${rp_cells[@]}"; do
            has "^read_checkpoint -cell $cell .*/rm_$m\.dcp$" "model $m read into $cell with read_checkpoint -cell"
        done
    done
    before "^read_xdc .*/pblocks_$board_name\.xdc$" "^place_design" "the Pblocks are read before place_design"
    for cell in "${rp_cells[@]}"; do
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
        for cell in "${rp_cells[@]}"; do
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
    [ "$(wc -w <<< "$configs")" -ge 2 ] || problem "fewer than two configurations are written: $configs"
    for c in $configs; do
        sed -n "${pv}p" "$log" | grep -qF -- "$c" || problem "pr_verify does not compare configuration $(basename "$c")"
    done
    before "^pr_verify " "^write_bitstream " "pr_verify runs before any bitstream is written"
}

check_images() {
    local models=$1 m cell f
    for m in $models; do
        for cell in "${rp_cells[@]}"; do
            f="$out/$m-$cell.bit"
            has "^write_bitstream (-force )?-cell $cell [^ ]*/$m-$cell\.bit$" "a partial image of $m for $cell"
            if [ ! -f "$f" ]; then problem "no partial image $f in the catalog"; continue; fi
            grep -q "PARTIAL=TRUE" "$f" || problem "$(basename "$f")'s header lacks PARTIAL=TRUE"
            grep -qE "^cell $cell module \"[^\"]*/$m\.hex\"$" "$f" \
                || problem "$(basename "$f") was not written with $m in $cell"
        done
        f="$out/$m-full.bit"
        has "^write_bitstream (-force )?-no_partial_bitfile [^ ]*/$m-full\.bit$" "a full image of $m"
        if [ ! -f "$f" ]; then problem "no full image $f in the catalog"; continue; fi
        if grep -q "PARTIAL=TRUE" "$f"; then problem "$(basename "$f") says PARTIAL=TRUE"; fi
        grep -qE "^cell ${rp_cells[0]} module \"[^\"]*/$m\.hex\"$" "$f" \
            || problem "$(basename "$f") does not hold $m in ${rp_cells[0]} (the manifest's slots = [0])"
    done
    has "^set_property BITSTREAM.CONFIG.USERID $iface " "UserID set to the interface id $iface"
    for f in "$out"/*.bit; do
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
# addresses and the interrupt.
check_block_design() {
    local dt addr i port irq pin
    dt=$(device_tree "$board")
    addr=$(sed -n 's/.*fabric-shell@\([0-9a-f]*\) {.*/\1/p' <<< "$dt")
    has "^assign_bd_address -offset 0x0*${addr^^} -range 4K .* /M_AXI_SHELL/Reg$" \
        "the shell's window at 0x$addr (the device tree's fabric-shell@$addr)"
    for i in 0 1; do
        addr=$(sed -n "s/.*slot${i}_decoupler: pr-decoupler@\([0-9a-f]*\) {.*/\1/p" <<< "$dt")
        port=M_AXI_DCP$i
        has "^assign_bd_address -offset 0x0*${addr^^} -range 4K .* /$port/Reg$" \
            "slot $i's decoupler at 0x$addr (the device tree's pr-decoupler@$addr)"
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

check_manifest() {
    local part=$1 models=$2 report
    report=$(python3 - "$out" "$part" "$models" "$iface" "$repo/bitstreams" <<'PY'
import hashlib, pathlib, sys, tomllib
out, part, models, iface, src = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(), int(sys.argv[4], 16), pathlib.Path(sys.argv[5])
sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
try:
    m = tomllib.loads((out / "manifest.toml").read_text())
except Exception as e:
    print(f"manifest.toml does not parse: {e}"); sys.exit()
if m.get("version") != 1: print(f"manifest version {m.get('version')}")
if m.get("shell", {}).get("interface_id") != iface: print(f"[shell] interface_id is {m.get('shell')}")
names = [e["name"] for e in m.get("model", [])]
if names != models: print(f"the manifest lists models {names}, the board {models}")
listed = set()
for e in m.get("model", []):
    n = e["name"]
    if sha(out / e["tokenizer"]) != e["tokenizer_sha256"]: print(f"{n}: tokenizer_sha256 is not {e['tokenizer']}'s")
    if e.get("identity") != sha(src / f"{n}.bit"): print(f"{n}: identity is not what mktable printed")
    want = {("partial", (0,)), ("partial", (1,)), ("full", (0,))}
    got = {(i["kind"], tuple(i["slots"])) for i in e["image"]}
    if got != want: print(f"{n}: images {sorted(got)}, expected {sorted(want)}")
    for i in e["image"]:
        f = out / i["file"]
        listed.add(i["file"])
        if not f.is_file(): print(f"{n}: {i['file']} is listed but missing"); continue
        if sha(f) != i["sha256"]: print(f"{n}: {i['file']}: sha256 {i['sha256']} is not the file's {sha(f)}")
        if i["part"] != part: print(f"{n}: {i['file']}: part {i['part']}, the board's is {part}")
        kind = "partial" if "PARTIAL=TRUE" in f.read_text() else "full"
        if kind != i["kind"]: print(f"{n}: {i['file']} is listed {i['kind']} but its header says {kind}")
for f in out.glob("*.bit"):
    if f.name not in listed: print(f"{f.name} is in the catalog but not in the manifest")
PY
)
    while IFS= read -r line; do [ -z "$line" ] || problem "manifest: $line"; done <<< "$report"
}

# check_all BOARD: every check against the last run ($log, $out, $work).
check_all() {
    local part models
    board=$1
    part=$(board_part "$board")
    models=$(board_models "$board")
    check_part "$part"
    check_synthesis "$models"
    check_implementation "$models" "$board"
    check_verify
    check_images "$models"
    check_block_design
    check_manifest "$part" "$models"
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

# ---- the flow, for each board ------------------------------------------------
for board in kv260 zed; do
    run_flow good "$board"
    if [ "$status" -ne 0 ]; then
        echo "FAIL: $board: build-bitstreams failed ($status):"; echo "$output"; failures=$((failures + 1)); continue
    fi
    for check in part synthesis implementation verify images block_design manifest; do
        part=$(board_part "$board")
        models=$(board_models "$board")
        case $check in
            part) check_part "$part" ;;
            synthesis) check_synthesis "$models" ;;
            implementation) check_implementation "$models" "$board" ;;
            manifest) check_manifest "$part" "$models" ;;
            images) check_images "$models" ;;
            *) "check_$check" ;;
        esac
        report "$board: $check ($(wc -l < "$log") calls)"
    done
done

# The slot's black-box definition (generated from rtl/slot/fabric_slot.v)
# against the module itself, both read by Yosys: the same parameters and
# the same ports, directions and widths.
stub_v="$tmp/good/kv260/work/gen/fabric_slot_black_box.v"
if ! command -v yosys >/dev/null; then
    echo "SKIP: no yosys: the slot's black box is not compared with the module"
elif [ ! -f "$stub_v" ]; then
    echo "FAIL: the flow wrote no $stub_v"; failures=$((failures + 1))
else
    yosys -q -p "read_verilog $stub_v; write_json $tmp/bb.json"
    yosys -q -p "read_verilog -lib rtl/slot/fabric_slot.v; write_json $tmp/slot.json"
    said=$(python3 - "$tmp/bb.json" "$tmp/slot.json" <<'PY'
import json, sys
bb, slot = (json.load(open(f))["modules"]["fabric_slot"] for f in sys.argv[1:])
shape = lambda m: ({k: (v["direction"], len(v["bits"])) for k, v in m["ports"].items()},
                   sorted(m.get("parameter_default_values", {})))
if "black_box" not in bb.get("attributes", {}): print("it has no (* black_box *)")
if shape(bb) != shape(slot): print(f"{shape(bb)} is not the module's {shape(slot)}")
PY
)
    if [ -z "$said" ]; then
        echo "ok: the slot's black box has fabric_slot's parameters and ports (Yosys)"; passed=$((passed + 1))
    else
        echo "FAIL: the slot's black box: $said"; failures=$((failures + 1))
    fi
fi

# ---- broken flows: each must fail, and say why --------------------------------
# mutant NAME FILE SED EXPECT: a copy of rtl/vivado with SED applied to FILE;
# the run or the checks must fail with a message matching EXPECT.
mutant() {
    local name=$1 file=$2 script=$3 expect=$4 flow="$tmp/mutants/$1"
    mkdir -p "$tmp/mutants"
    cp -r rtl/vivado "$flow"
    sed -i -e "$script" "$flow/$file"
    if cmp -s "rtl/vivado/$file" "$flow/$file"; then
        echo "FAIL: mutant $name no longer applies to rtl/vivado/$file: update tests/vivado-flow.sh"
        failures=$((failures + 1)); return
    fi
    run_flow "mutant-$name" kv260 "$flow"
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

# ---- build-bitstreams' refusals -------------------------------------------------
shown() { # CMD...: without env and its assignments, the paths short
    local w out=()
    for w in "$@"; do
        [[ "$w" == env || "$w" =~ ^[A-Z_]+= ]] && continue
        out+=("${w#"$tmp"/}")
    done
    echo "${out[*]}"
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
expect 0 "Usage" scripts/build-bitstreams --help
expect 2 "unknown option" scripts/build-bitstreams --no-such-option
expect 2 "no board 'vc707'" env PATH="$repo/tests/vivado:$PATH" scripts/build-bitstreams vc707
expect 2 "one board" env PATH="$repo/tests/vivado:$PATH" scripts/build-bitstreams --out "$tmp/x" kv260 zed
if ! command -v vivado >/dev/null; then
    expect 1 "vivado not found" scripts/build-bitstreams kv260
fi
mkdir -p "$tmp/foreign" && touch "$tmp/foreign/notes.txt"
expect 2 "did not write" env PATH="$repo/tests/vivado:$PATH" FABRIC_MKTABLE="$repo/tests/vivado/mktable" \
    VIVADO_STUB_LOG="$tmp/refused.log" scripts/build-bitstreams --out "$tmp/foreign" --work "$tmp/w1" kv260
: > "$tmp/refused.log"
expect 1 "its table is 100000 words, a zed slot holds" env PATH="$repo/tests/vivado:$PATH" \
    FABRIC_MKTABLE="$repo/tests/vivado/mktable" FAKE_MKTABLE_WORDS=100000 VIVADO_STUB_LOG="$tmp/refused.log" \
    scripts/build-bitstreams --rtl "$tmp/rtl" --out "$tmp/fit" --work "$tmp/w2" zed
if [ -s "$tmp/refused.log" ]; then
    echo "FAIL: Vivado ran for a table larger than a slot"; failures=$((failures + 1))
fi
run_flow timing kv260 "" VIVADO_STUB_SLACK=-0.250
if [ "$status" -ne 0 ] && grep -q "misses setup timing" <<< "$output"; then
    echo "ok: a configuration that misses timing stops the flow"; passed=$((passed + 1))
else
    echo "FAIL: a configuration with negative slack did not stop the flow ($status): $output"; failures=$((failures + 1))
fi

echo "vivado-flow: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
