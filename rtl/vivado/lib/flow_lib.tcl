# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The DFX flow's plain Tcl: its arguments, its sources, the black-box
# definition of the slot, the configurations and the images' names. None of
# it calls Vivado, so tests/vivado-flow.sh runs it for real under tclsh, not
# against stubs.

namespace eval fabric {
    # The reconfigurable partitions: cells of fabric_top, each an instance of
    # fabric_slot (rtl/top/fabric_top.v).
    variable rp_cells {slot0 slot1}
    variable rm_module fabric_slot
    variable top_module fabric_top
}

# Parses the flow's -tclargs into a dict; errors name the argument.
#   --board NAME        kv260 or zed (rtl/vivado/boards/NAME.tcl)
#   --rtl DIR           the RTL tree (default: rtl/, beside this directory)
#   --work DIR          checkpoints, reports, generated sources
#   --out DIR           the catalog's images
#   --interface-id HEX  the shell's interface id, written as each image's UserID
#   --engine NAME KIND VERSION   an engine: its name in the catalog and
#                       what its slot reports in SLOT_ENGINE, each 1..65535
#                       in decimal (repeat; order is the catalog's)
# Engines are the reconfigurable modules; models are tables the daemon
# writes into DDR, so none is an argument here.
proc fabric::parse_args {argv} {
    set here [file dirname [file dirname [file normalize [info script]]]]
    set a [dict create board "" rtl [file dirname $here] work "" out "" \
        interface_id "" engines {}]
    while {[llength $argv] > 0} {
        set argv [lassign $argv opt]
        switch -- $opt {
            --board - --rtl - --work - --out - --interface-id {
                if {[llength $argv] < 1} { error "flow: $opt needs a value" }
                set argv [lassign $argv value]
                dict set a [string map {- _} [string range $opt 2 end]] $value
            }
            --engine {
                if {[llength $argv] < 3} { error "flow: --engine needs NAME KIND VERSION" }
                set argv [lassign $argv name kind version]
                # The daemon's rule for a catalog name (valid_model_name in
                # firmware/fabricd/src/catalog/mod.rs): it names files too.
                if {![regexp {^[A-Za-z0-9][A-Za-z0-9_.-]*$} $name] || [string match *..* $name]
                    || [string length $name] > 64} {
                    error "flow: engine name '$name' is not a plain name (letters, digits, -, _, .)"
                }
                # Decimal without a leading zero: Tcl's expr reads 010 as
                # octal, and synth_design -generic binds 0x... as a string.
                foreach {what value} [list KIND $kind VERSION $version] {
                    if {![regexp {^[1-9][0-9]{0,4}$} $value] || $value > 65535} {
                        error "flow: engine $name: $what '$value' is not a decimal number from 1 to 65535"
                    }
                }
                foreach e [dict get $a engines] {
                    lassign $e other okind oversion
                    if {$other eq $name} { error "flow: engine $name given twice" }
                    if {$okind == $kind && $oversion == $version} {
                        error "flow: engines $other and $name are both kind $kind version $version: SLOT_ENGINE could not tell them apart"
                    }
                }
                dict lappend a engines [list $name $kind $version]
            }
            default { error "flow: unknown argument '$opt'" }
        }
    }
    foreach key {board work out interface_id} {
        if {[dict get $a $key] eq ""} {
            error "flow: --[string map {_ -} $key] is required"
        }
    }
    if {![regexp {^0x[0-9A-Fa-f]{8}$} [dict get $a interface_id]]} {
        error "flow: --interface-id '[dict get $a interface_id]' is not 0x followed by 8 hex digits"
    }
    if {[llength [dict get $a engines]] == 0} { error "flow: no --engine given" }
    foreach key {rtl work out} { dict set a $key [file normalize [dict get $a $key]] }
    return $a
}

# fabric_slot's ENGINE generic for an engine: what its slot reports in
# SLOT_ENGINE, version << 16 | kind (docs/fabric-contract.md), in decimal.
proc fabric::engine_generic {kind version} {
    return [expr {($version << 16) | $kind}]
}

# The Verilog of a directory, sorted so that runs read it in one order.
proc fabric::verilog_in {dir} {
    lsort [glob -nocomplain -directory $dir -types f *.v *.sv]
}

# The sources by partition: the static design (the board top and the
# shell, decouplers included) and the reconfigurable module (the slot and
# its engine), each with rtl/common (the register slice both sides of a
# partition boundary use); rtl/sim and rtl/formal are the simulators' and
# the provers'.
proc fabric::sources {rtl} {
    variable top_module
    set top [file join $rtl top $top_module.v]
    if {![file exists $top]} {
        error "flow: the board top $top is missing (module $top_module: the PS block design, the shell, cells slot0 and slot1)"
    }
    set common [verilog_in [file join $rtl common]]
    set static [concat [verilog_in [file join $rtl top]] $common [verilog_in [file join $rtl shell]]]
    set rm [concat $common [verilog_in [file join $rtl slot]] [verilog_in [file join $rtl engine]]]
    if {[llength $rm] == 0} { error "flow: no Verilog in $rtl/slot and $rtl/engine" }
    set incdirs {}
    foreach d {top common shell slot engine} {
        if {[file isdirectory [file join $rtl $d]]} { lappend incdirs [file join $rtl $d] }
    }
    return [dict create static $static rm $rm incdirs $incdirs]
}

# Writes the black-box definition of the reconfigurable module that the
# static design is synthesized against (UG909, "Synthesis": the static is
# synthesized with "black box module definitions for RMs"; UG901, "Black
# Boxes": `(* black_box *) module ...`). It is the module's own header,
# parameters and ports, taken from its source, so it cannot drift from it.
proc fabric::black_box_stub {rtl out} {
    variable rm_module
    set src [file join $rtl slot $rm_module.v]
    set f [open $src]
    set text [read $f]
    close $f
    # Comments first: a `);` or `;` in one must not end the header.
    regsub -all {/\*.*?\*/} $text {} text
    regsub -all {//[^\n]*} $text {} text
    if {![regexp "module\\s+$rm_module\\M\[^;\]*;" $text header]} {
        error "flow: no 'module $rm_module ... ;' header in $src"
    }
    if {![string match *(* $header]} {
        error "flow: the header of $rm_module in $src has no port list"
    }
    file mkdir [file dirname $out]
    set f [open $out w]
    puts $f "// Generated by rtl/vivado/lib/flow_lib.tcl from $src: the"
    puts $f "// reconfigurable module as a black box, for the static design's synthesis."
    puts $f "(* black_box *) $header"
    puts $f "endmodule"
    close $f
    return $out
}

# The configurations to implement, each a dict {name slots}, slots naming
# the engine per RP cell. Engine i goes into slot0 of configuration i and
# engine i+1 (wrapping) into slot1, so that every (slot, engine) pair is
# implemented once and each engine's full image (configuration i) holds it
# in slot 0, and in slot 1 too when the board has one engine. The grey box
# (both slots' ports buffered, no module; UG909, "Grey box") is added
# last: a configuration that pr_verify compares even when a board has one
# engine, and a blank partial image per slot.
proc fabric::configurations {engines} {
    variable rp_cells
    set n [llength $engines]
    set configs {}
    for {set i 0} {$i < $n} {incr i} {
        set slots {}
        set names {}
        set k 0
        foreach cell $rp_cells {
            set e [lindex $engines [expr {($i + $k) % $n}] 0]
            dict set slots $cell $e
            lappend names $e
            incr k
        }
        lappend configs [dict create name "config[expr {$i + 1}]_[join $names _]" slots $slots]
    }
    set slots {}
    foreach cell $rp_cells { dict set slots $cell "" }
    lappend configs [dict create name grey_box slots $slots]
    return $configs
}

# The catalog's file names: an engine's partial image for an RP cell, its
# full image, a grey box's partial image. scripts/build-bitstreams lists
# what the flow wrote (images.tsv), so these names live here only.
proc fabric::partial_name {engine cell} { return "$engine-$cell.bit" }
proc fabric::full_name {engine} { return "$engine-full.bit" }
proc fabric::blank_name {cell} { return "blank-$cell.bit" }
