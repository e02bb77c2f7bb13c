# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The DFX flow's plain Tcl: its arguments, its sources, the black-box
# definition of the slot, the wrapper that gives an engine's module the
# partition's name, the configurations and the images' names. None of it
# calls Vivado, so tests/vivado-flow.sh runs it for real under tclsh, not
# against stubs.

namespace eval fabric {
    # The reconfigurable partitions, one a slot. The catalog names a slot's
    # images by the slot (slot0, slot1); its cell in fabric_top is rp_cell's
    # (the instance rm of the slot's generate block, rtl/top/fabric_top.v),
    # a black box of rp_module in the static design.
    variable slots {slot0 slot1}
    variable rp_module fabric_slot
    variable top_module fabric_top
    # The module (rtl/slot/) an engine of each kind is synthesized from:
    # kind 1 the word-trigram engine, kind 2 the transformer (contract
    # sections 9 and 10). Each module's default ENGINE is the engine it
    # implements (tests/vivado-flow.sh checks this table against it).
    variable rm_modules {1 fabric_slot 2 fabric_slot_lm}
}

# A slot's reconfigurable cell: what Vivado names the instance rm of
# fabric_top's generate block SLOT.
proc fabric::rp_cell {slot} { return $slot.rm }

# The module an engine of KIND is synthesized from.
proc fabric::rm_module {kind} {
    variable rm_modules
    if {![dict exists $rm_modules $kind]} {
        set known {}
        dict for {k m} $rm_modules { lappend known "$k ($m)" }
        error "flow: no RTL implements engine kind $kind (kinds: [join $known {, }])"
    }
    return [dict get $rm_modules $kind]
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
                if {[catch {rm_module $kind} err]} { error "flow: engine $name: [string range $err 6 end]" }
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

# An engine's ENGINE generic: what its slot reports in
# SLOT_ENGINE, version << 16 | kind (docs/fabric-contract.md), in decimal.
proc fabric::engine_generic {kind version} {
    return [expr {($version << 16) | $kind}]
}

# The Verilog of a directory, sorted so that runs read it in one order.
proc fabric::verilog_in {dir} {
    lsort [glob -nocomplain -directory $dir -types f *.v *.sv]
}

# The sources by partition: the static design (the board top and the
# shell, decouplers included) and the reconfigurable modules (the slots'
# modules and their engines, the transformer's in rtl/engine/lm), each with
# rtl/common (the register slice both sides of a partition boundary use);
# rtl/sim and rtl/formal are the simulators' and the provers'.
proc fabric::sources {rtl} {
    variable top_module
    set top [file join $rtl top $top_module.v]
    if {![file exists $top]} {
        error "flow: the board top $top is missing (module $top_module: the PS block design, the shell, cells slot0.rm and slot1.rm)"
    }
    set common [verilog_in [file join $rtl common]]
    set static [concat [verilog_in [file join $rtl top]] $common [verilog_in [file join $rtl shell]]]
    set rm [concat $common [verilog_in [file join $rtl slot]] [verilog_in [file join $rtl engine]] \
        [verilog_in [file join $rtl engine lm]]]
    if {[llength $rm] == 0} { error "flow: no Verilog in $rtl/slot and $rtl/engine" }
    set incdirs {}
    foreach d {top common shell slot engine} {
        if {[file isdirectory [file join $rtl $d]]} { lappend incdirs [file join $rtl $d] }
    }
    return [dict create static $static rm $rm incdirs $incdirs]
}

# A module's header, `module NAME ... ;`, from rtl/slot/NAME.v, its
# comments dropped (a `);` or `;` in one must not end it).
proc fabric::module_header {rtl module} {
    set src [file join $rtl slot $module.v]
    if {![file exists $src]} { error "flow: no $src (module $module)" }
    set f [open $src]
    set text [read $f]
    close $f
    regsub -all {/\*.*?\*/} $text {} text
    regsub -all {//[^\n]*} $text {} text
    if {![regexp "module\\s+$module\\M\[^;\]*;" $text header]} {
        error "flow: no 'module $module ... ;' header in $src"
    }
    if {![string match *(* $header]} {
        error "flow: the header of $module in $src has no port list"
    }
    return $header
}

# Where a header's port list opens: the index of its `(`, after the
# parameters' `#( ... )` if any.
proc fabric::port_list_start {header} {
    if {![regexp -indices {\)\s*\(\s*(?:input|output|inout)\M} $header at]
        && ![regexp -indices {^module\s+[A-Za-z_][A-Za-z0-9_]*\s*\(} $header at]} {
        error "flow: no port list in '[string range $header 0 60]...'"
    }
    return [string first "(" $header [lindex $at 0]]
}

# A header's parameters, in order: a list of {name declaration default},
# the declaration as written (`parameter integer`, `parameter [31:0]`) and
# the default's expression.
proc fabric::header_parameters {header} {
    set open [string first "#(" $header]
    set ports [port_list_start $header]
    if {$open < 0 || $open > $ports} { return {} }
    set text [string range $header [expr {$open + 2}] [expr {[string last ) $header $ports] - 1}]]
    regsub -all {\mparameter\M} $text "\x01parameter" text
    set params {}
    foreach chunk [lrange [split $text \x01] 1 end] {
        if {![regexp {^(parameter\s+(?:\[[^]]*\]\s*|integer\s+)?)([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$} \
                [string trim $chunk] -> decl name default]} {
            error "flow: a parameter this flow cannot read: '[string trim $chunk]'"
        }
        lappend params [list $name [string trim $decl] [string trimright [string trim $default] ,]]
    }
    return $params
}

# A header's ports, in order: a list of {name direction}. A declaration
# may name more than one port.
proc fabric::header_ports {header} {
    set list [string range $header [expr {[port_list_start $header] + 1}] end]
    set list [string range $list 0 [expr {[string last ) $list] - 1}]]
    set ports {}
    set dir ""
    foreach item [split $list ,] {
        regexp {^\s*(input|output|inout)\M} $item -> dir
        if {![regexp {([A-Za-z_][A-Za-z0-9_]*)\s*$} $item -> name]} {
            error "flow: a port declaration without a name: '[string trim $item]'"
        }
        lappend ports [list $name $dir]
    }
    return $ports
}

# Writes the black-box definition of the reconfigurable partition's module
# that the static design is synthesized against (UG909, "Synthesis": the
# static is synthesized with "black box module definitions for RMs"; UG901,
# "Black Boxes": `(* black_box *) module ...`). It is the module's own
# header, parameters and ports, taken from its source, so it cannot drift
# from it.
proc fabric::black_box_stub {rtl out} {
    variable rp_module
    set src [file join $rtl slot $rp_module.v]
    set header [module_header $rtl $rp_module]
    file mkdir [file dirname $out]
    set f [open $out w]
    puts $f "// Generated by rtl/vivado/lib/flow_lib.tcl from $src: the"
    puts $f "// reconfigurable module as a black box, for the static design's synthesis."
    puts $f "(* black_box *) $header"
    puts $f "endmodule"
    close $f
    return $out
}

# Writes MODULE (rtl/slot/MODULE.v) under the partition's module name: every
# module of a partition has the name of the static's black box as well as
# its ports (UG909, "Synthesizing Reconfigurable Modules": "The name of the
# block must be the same in each instance"), so an engine whose module is
# not rp_module is synthesized as this wrapper: rp_module's parameters
# (with MODULE's defaults where MODULE has them, so its ENGINE is MODULE's)
# and ports, over an instance of MODULE with its ports connected by name
# and each parameter both have passed on. The ports must be the
# partition's, name for name and direction for direction
# (tests/vivado-flow.sh compares the widths, with Yosys).
proc fabric::rm_wrapper {rtl module out} {
    variable rp_module
    set header [module_header $rtl $rp_module]
    set inner [module_header $rtl $module]
    set ports [header_ports $header]
    set inner_ports [header_ports $inner]
    if {[lsort $ports] ne [lsort $inner_ports]} {
        set missing {}
        set extra {}
        foreach p $ports { if {$p ni $inner_ports} { lappend missing [join $p " "] } }
        foreach p $inner_ports { if {$p ni $ports} { lappend extra [join $p " "] } }
        error "flow: $module's ports are not the partition's ($rp_module): lacks {[join $missing {, }]}, adds {[join $extra {, }]}"
    }
    # The partition's parameters, each shared one with MODULE's default (its
    # ENGINE is the engine it implements), and passed on.
    set defaults {}
    foreach p [header_parameters $inner] { dict set defaults [lindex $p 0] [lindex $p 2] }
    set decls {}
    set passed {}
    foreach p [header_parameters $header] {
        lassign $p name decl default
        if {[dict exists $defaults $name]} {
            set default [dict get $defaults $name]
            lappend passed ".$name\($name\)"
        }
        lappend decls "    $decl $name = $default"
    }
    set conns {}
    foreach p $ports { lappend conns ".[lindex $p 0]\([lindex $p 0]\)" }
    # The port list as the partition writes it, but an output the instance
    # drives is a wire here, whatever it is inside.
    set list [string range $header [port_list_start $header] end]
    regsub -all {\moutput(\s+)reg\M} $list {output\1wire} list
    file mkdir [file dirname $out]
    set f [open $out w]
    puts $f "// Generated by rtl/vivado/lib/flow_lib.tcl: $module (rtl/slot/$module.v) under"
    puts $f "// the partition's module name, $rp_module, with its ports: every module of a"
    puts $f "// reconfigurable partition has its black box's name and ports (UG909)."
    if {[llength $decls]} {
        puts $f "module $rp_module #(\n[join $decls ",\n"]\n) $list"
    } else {
        puts $f "module $rp_module $list"
    }
    puts $f "    $module #([join $passed {, }]) rm ("
    puts $f "        [join $conns {, }]"
    puts $f "    );"
    puts $f "endmodule"
    close $f
    return $out
}

# The sources an engine of KIND is synthesized from, out of context as
# rp_module: the reconfigurable modules' sources, and for a module other
# than rp_module its wrapper in place of rp_module's own file.
proc fabric::rm_sources {src rtl kind gen} {
    variable rp_module
    set module [rm_module $kind]
    if {$module eq $rp_module} { return [dict get $src rm] }
    set own [file normalize [file join $rtl slot $rp_module.v]]
    set files {}
    foreach file [dict get $src rm] {
        if {[file normalize $file] ne $own} { lappend files $file }
    }
    lappend files [rm_wrapper $rtl $module [file join $gen ${module}_as_$rp_module.v]]
    return $files
}

# The configurations to implement, each a dict {name slots}, slots naming
# the engine per slot. Engine i goes into slot0 of configuration i and
# engine i+1 (wrapping) into slot1, so that every (slot, engine) pair is
# implemented once and each engine's full image (configuration i) holds it
# in slot 0, and in slot 1 too when the board has one engine. The grey box
# (both slots' ports buffered, no module; UG909, "Grey box") is added
# last: a configuration that pr_verify compares even when a board has one
# engine, and a blank partial image per slot.
proc fabric::configurations {engines} {
    variable slots
    set n [llength $engines]
    set configs {}
    for {set i 0} {$i < $n} {incr i} {
        set held {}
        set names {}
        set k 0
        foreach slot $slots {
            set e [lindex $engines [expr {($i + $k) % $n}] 0]
            dict set held $slot $e
            lappend names $e
            incr k
        }
        lappend configs [dict create name "config[expr {$i + 1}]_[join $names _]" slots $held]
    }
    set held {}
    foreach slot $slots { dict set held $slot "" }
    lappend configs [dict create name grey_box slots $held]
    return $configs
}

# The catalog's file names: an engine's partial image for a slot, its full
# image, a grey box's partial image. scripts/build-bitstreams lists what the
# flow wrote (images.tsv), so these names live here only.
proc fabric::partial_name {engine slot} { return "$engine-$slot.bit" }
proc fabric::full_name {engine} { return "$engine-full.bit" }
proc fabric::blank_name {slot} { return "blank-$slot.bit" }
