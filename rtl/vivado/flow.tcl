# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The fabric's Dynamic Function eXchange (DFX) flow for one board, in
# Vivado's non-project mode: a static shell and two reconfigurable
# partitions (cells slot0.rm and slot1.rm of fabric_top, black boxes of
# fabric_slot in the static), each engine one reconfigurable module with
# its ENGINE generic (contract 2.0): the module of its kind (fabric_slot
# the trigram engine, fabric_slot_lm the transformer; lib/flow_lib.tcl),
# synthesized under the partition's module name. No model is in a
# bitstream: a model is a table (.ftb, .flm) that fabricd writes into a
# slot's region of the DMA buffer and commits, and the slot's engine reads
# it from DDR through its own HP port. Run by scripts/build-bitstreams:
#
#   vivado -mode batch -source rtl/vivado/flow.tcl -tclargs \
#       --board kv260 --work DIR --out DIR --interface-id 0x5EED0002 \
#       --engine trigram-v2 1 2 --engine transformer-v1 2 1
#
# The order is UG909's ("Vivado Design Suite User Guide: Dynamic Function
# eXchange", chapter "Vivado Software Flow": Synthesis, Implementation,
# Verifying Configurations, Generating Bitstreams) and that of UG947's
# Tcl scripts (the DFX tutorial):
#   1. each engine's slot synthesized out of context (synth_design -mode
#      out_of_context -top fabric_slot, ENGINE its SLOT_ENGINE value; an
#      engine whose module is not fabric_slot through a wrapper of that
#      name, UG909 "Synthesizing Reconfigurable Modules"), a checkpoint each;
#   2. the static design synthesized with the slot as a black box (the PS's
#      block design, the board top, the shell and its decouplers);
#   3. the first configuration: the static checkpoint opened, each RP cell
#      marked HD.RECONFIGURABLE, a module read into each (read_checkpoint
#      -cell), the Pblocks read, then opt, place, route and its
#      checkpoint; then the static alone: each RP emptied (update_design
#      -black_box), everything locked (lock_design -level routing: "the
#      only supported preservation level" for DFX) and saved;
#   4. every further configuration on that locked static, the last the
#      grey box (update_design -buffer_ports);
#   5. pr_verify across all configurations, before any bitstream;
#   6. for each configuration: a partial image per slot (write_bitstream
#      -cell, UG909 "Generating Partial Bitstreams Only"), the full image
#      of the engine in slot 0 (-no_partial_bitfile), with BITSTREAM.CONFIG.
#      USERID the shell's interface id (docs/fabric-contract.md section 7:
#      fabricd refuses a partial image whose UserID is not INTERFACE_ID);
#      then the shell's .bin for the FPGA manager (write_cfgmem -format BIN
#      -interface SMAPx32 -disablebitswap, UG909 "Formatting BIN Files for
#      Delivery to Internal Configuration Ports").
# The steps below keep to that order; tests/vivado-flow.sh runs this file
# under tclsh against stubs of every Vivado command it calls and checks the
# order from what they recorded.

set fabric_flow_dir [file dirname [file normalize [info script]]]
source [file join $fabric_flow_dir lib flow_lib.tcl]

namespace eval fabric {
    variable dir $::fabric_flow_dir
    variable opt {}     ;# the parsed arguments
    variable board {}   ;# rtl/vivado/boards/<board>.tcl
    variable src {}     ;# fabric::sources
    variable work {}    ;# dict: the work directory's parts
    variable configs {} ;# fabric::configurations
}

proc fabric::say {text} { puts "fabric flow: $text" }

proc fabric::rm_checkpoint {name} {
    variable work
    return [file join [dict get $work synth] rm_$name.dcp]
}

proc fabric::routed_checkpoint {config} {
    variable work
    return [file join [dict get $work impl] [dict get $config name]_routed.dcp]
}

proc fabric::report {name} {
    variable work
    return [file join [dict get $work reports] $name.rpt]
}

proc fabric::read_sources {files} {
    set v [lsearch -all -inline -not -glob $files *.sv]
    set sv [lsearch -all -inline -glob $files *.sv]
    if {[llength $v]} { read_verilog $v }
    if {[llength $sv]} { read_verilog -sv $sv }
}

# 1. Each engine's slot, out of context, from the module of its kind. Every
# module of a partition has the black box's module name (UG909), so each is
# synthesized as rp_module: fabric_slot itself, or the wrapper of that name
# around the engine's module (lib/flow_lib.tcl, rm_wrapper). ENGINE is the
# constant the slot reports in SLOT_ENGINE, so each engine is its own
# module; DAW is the board's, as fabric_top passes it to both cells, so
# that the module's ports are the partition's. Integers in decimal (a 0x
# literal binds as a string).
proc fabric::step_synth_engines {} {
    variable opt
    variable board
    variable src
    variable dir
    variable work
    variable rp_module
    set part [dict get $board part]
    foreach e [dict get $opt engines] {
        lassign $e name kind version
        set id [engine_generic $kind $version]
        set module [rm_module $kind]
        say "synthesizing engine $name (kind $kind, version $version: ENGINE=$id) out of context: $module as $rp_module"
        set files [rm_sources $src [dict get $opt rtl] $kind [dict get $work gen]]
        create_project -in_memory -part $part
        read_sources $files
        read_xdc -mode out_of_context [file join $dir xdc slot_ooc_[dict get $board name].xdc]
        synth_design -mode out_of_context -top $rp_module -part $part \
            -include_dirs [dict get $src incdirs] \
            -generic ENGINE=$id -generic DAW=[dict get $board dma_addr_bits]
        write_checkpoint -force [rm_checkpoint $name]
        report_utilization -file [report rm_${name}_synth_utilization]
        close_project
    }
}

# 2. The static design: fabric_top with its defaults, each slot's cell a
# black box of fabric_slot.
proc fabric::step_synth_static {} {
    variable opt
    variable board
    variable src
    variable dir
    variable work
    variable top_module
    set part [dict get $board part]
    say "synthesizing the static design ($top_module) for [dict get $board part]"
    create_project -in_memory -part $part
    set_property target_language Verilog [current_project]
    source [file join $dir bd ps_[dict get $board name].tcl]
    fabric::bd::create [dict get $work bd]
    set bd [get_files fabric_ps.bd]
    # Synthesized with the top, not out of context (non-project mode).
    set_property synth_checkpoint_mode None $bd
    generate_target all $bd
    set stub [black_box_stub [dict get $opt rtl] [file join [dict get $work gen] fabric_slot_black_box.v]]
    read_sources [concat [dict get $src static] [list $stub]]
    synth_design -top $top_module -part $part -include_dirs [dict get $src incdirs] \
        -generic CLK_MHZ=[dict get $board clk_mhz] -generic DAW=[dict get $board dma_addr_bits]
    write_checkpoint -force [file join [dict get $work synth] static.dcp]
    report_utilization -file [report static_synth_utilization]
    close_project
}

# Setup and hold met, or the configuration fails: a bitstream that misses
# timing is not one to hand to a board.
proc fabric::check_timing {name} {
    foreach kind {setup hold} {
        set slack [get_property SLACK [get_timing_paths -$kind -max_paths 1 -nworst 1]]
        if {$slack ne "" && $slack < 0} {
            error "flow: $name misses $kind timing (worst slack $slack ns): see [report ${name}_timing]"
        }
    }
}

proc fabric::route_and_save {config} {
    set name [dict get $config name]
    place_design
    route_design
    report_timing_summary -file [report ${name}_timing]
    report_utilization -file [report ${name}_utilization]
    report_route_status -file [report ${name}_route_status]
    check_timing $name
    write_checkpoint -force [routed_checkpoint $config]
}

# 3 and 4. The configurations.
proc fabric::step_implement {} {
    variable configs
    variable slots
    variable board
    variable dir
    variable work
    set static [file join [dict get $work impl] static_routed.dcp]
    set first 1
    foreach config $configs {
        set name [dict get $config name]
        say "implementing $name ([dict get $config slots])"
        if {$first} {
            open_checkpoint [file join [dict get $work synth] static.dcp]
            foreach slot $slots {
                set_property HD.RECONFIGURABLE true [get_cells [rp_cell $slot]]
            }
            foreach slot $slots {
                read_checkpoint -cell [rp_cell $slot] [rm_checkpoint [dict get $config slots $slot]]
            }
            read_xdc [file join $dir xdc pblocks_[dict get $board name].xdc]
            opt_design
            route_and_save $config
            # The static alone, its placement and routing locked for every
            # further configuration (UG909, "Preserving Implementation Data").
            foreach slot $slots {
                update_design -cell [rp_cell $slot] -black_box
            }
            lock_design -level routing
            write_checkpoint -force $static
            close_design
            set first 0
            continue
        }
        open_checkpoint $static
        set grey 1
        foreach slot $slots {
            set engine [dict get $config slots $slot]
            if {$engine eq ""} {
                update_design -cell [rp_cell $slot] -buffer_ports
            } else {
                read_checkpoint -cell [rp_cell $slot] [rm_checkpoint $engine]
                set grey 0
            }
        }
        if {!$grey} { opt_design }
        route_and_save $config
        close_design
    }
}

# 5. Every configuration against the first: the static and the partition
# pins must be the same in all (UG909, "Verifying Configurations").
proc fabric::step_verify {} {
    variable configs
    set dcps {}
    foreach config $configs { lappend dcps [routed_checkpoint $config] }
    say "pr_verify across [llength $dcps] configurations"
    pr_verify -initial [lindex $dcps 0] -additional [lrange $dcps 1 end] \
        -file [report pr_verify]
}

# 6. The images. images.tsv lists what went into the catalog, one line
# each, tab-separated: kind (partial or full), engine, slots, file. A
# partial image's slots is its slot's number; a full image's is the slots
# holding its engine: "0,1" when both slots of its configuration hold it
# (a board with one engine), else "0".
proc fabric::step_bitstreams {} {
    variable configs
    variable slots
    variable opt
    variable work
    set out [dict get $opt out]
    file mkdir $out [file join $out shell]
    set images {}
    set shell ""
    foreach config $configs {
        set name [dict get $config name]
        say "writing the images of $name"
        open_checkpoint [routed_checkpoint $config]
        set_property BITSTREAM.CONFIG.USERID [dict get $opt interface_id] [current_design]
        foreach slot $slots {
            set engine [dict get $config slots $slot]
            if {$engine eq ""} {
                set file [file join [dict get $work bit] [blank_name $slot]]
            } else {
                set file [file join $out [partial_name $engine $slot]]
                lappend images [list partial $engine [lsearch $slots $slot] $file]
            }
            write_bitstream -force -cell [rp_cell $slot] $file
        }
        set engine [dict get $config slots [lindex $slots 0]]
        if {$engine ne ""} {
            set file [file join $out [full_name $engine]]
            write_bitstream -force -no_partial_bitfile $file
            set holding {}
            foreach slot $slots {
                if {[dict get $config slots $slot] eq $engine} {
                    lappend holding [lsearch $slots $slot]
                }
            }
            lappend images [list full $engine [join $holding ,] $file]
            if {$shell eq ""} { set shell $file }
        }
        close_design
    }
    # The shell the board boots with (fabricd/shell/shell.bin): the first
    # configuration, byte-swapped for the PCAP as the FPGA manager loads it.
    write_cfgmem -force -format BIN -interface SMAPx32 -disablebitswap \
        -loadbit [list up 0x0 $shell] -file [file join $out shell shell.bin]
    set f [open [file join [dict get $work root] images.tsv] w]
    foreach image $images { puts $f [join $image \t] }
    close $f
}

proc fabric::main {argv} {
    variable opt
    variable board
    variable src
    variable work
    variable configs
    variable dir
    set opt [parse_args $argv]
    set board_file [file join $dir boards [dict get $opt board].tcl]
    if {![file exists $board_file]} {
        error "flow: no board '[dict get $opt board]' (boards: [join [lmap f [glob -directory [file join $dir boards] *.tcl] {file rootname [file tail $f]}] {, }])"
    }
    set board {}
    source $board_file
    set src [sources [dict get $opt rtl]]
    set root [dict get $opt work]
    set work [dict create root $root]
    foreach part {synth impl reports bd gen bit} {
        dict set work $part [file join $root $part]
        file mkdir [dict get $work $part]
    }
    set configs [configurations [dict get $opt engines]]
    foreach step {synth_engines synth_static implement verify bitstreams} {
        step_$step
    }
    say "done: [dict get $opt out]"
}

fabric::main $argv
