# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Out-of-context timing of the fabric's parts, for users who have Vivado:
# the evidence a clock is quoted with. Each part (the shell, a decoupler, a
# slot with the trigram engine, a slot with the transformer) is synthesized
# alone in the board's part (synth_design -mode out_of_context: no I/O
# buffers, its ports left as they are), its clock constrained at the
# board's fabric clock, then placed and routed, and its timing summary
# (WNS, WHS) and the distribution of its paths' logic levels
# (report_design_analysis -logic_level_distribution, what Xilinx's
# report_failfast summarises) are written. A part that misses setup or hold
# fails the run, naming its report. DIR/timing.tsv has a line a part: the
# part, its module, the clock's period, WNS and WHS.
#
# Out of context, a part's ports are neither placed nor constrained: the
# figures are the part's own paths, not the partition pins' of the whole
# DFX design, which only the flow (flow.tcl) routes. What scripts/synth-rtl
# reports without Vivado (the logic levels of every path, yosys) is the
# estimate; this is the measurement.
#
#   vivado -mode batch -source rtl/vivado/timing.tcl -tclargs \
#       --board kv260 --work DIR [--rtl DIR] [--part shell|decoupler|slot|slot_lm]...
#
# tests/vivado-flow.sh runs it under tclsh with every Vivado command
# stubbed, as it runs the flow.

set fabric_timing_dir [file dirname [file normalize [info script]]]
source [file join $fabric_timing_dir lib flow_lib.tcl]

namespace eval fabric::timing {
    variable dir $::fabric_timing_dir
    # part: its module, the sources it takes from fabric::sources (static
    # or rm), and the generics the board gives it.
    variable parts {
        shell     {module fabric_shell     sources static generics {CLK_MHZ DAW}}
        decoupler {module fabric_decoupler sources static generics {DAW}}
        slot      {module fabric_slot      sources rm     generics {DAW}}
        slot_lm   {module fabric_slot_lm   sources rm     generics {DAW}}
    }
}

proc fabric::timing::say {text} { puts "fabric timing: $text" }

proc fabric::timing::read_sources {files} {
    set v [lsearch -all -inline -not -glob $files *.sv]
    set sv [lsearch -all -inline -glob $files *.sv]
    if {[llength $v]} { read_verilog $v }
    if {[llength $sv]} { read_verilog -sv $sv }
}

proc fabric::timing::parse {argv} {
    variable parts
    variable dir
    set a [dict create board "" rtl [file dirname $dir] work "" parts {}]
    while {[llength $argv] > 0} {
        set argv [lassign $argv opt]
        switch -- $opt {
            --board - --rtl - --work {
                if {[llength $argv] < 1} { error "timing: $opt needs a value" }
                set argv [lassign $argv value]
                dict set a [string range $opt 2 end] $value
            }
            --part {
                if {[llength $argv] < 1} { error "timing: --part needs a value" }
                set argv [lassign $argv value]
                if {![dict exists $parts $value]} {
                    error "timing: no part '$value' (parts: [join [dict keys $parts] {, }])"
                }
                dict lappend a parts $value
            }
            default { error "timing: unknown argument '$opt'" }
        }
    }
    foreach key {board work} {
        if {[dict get $a $key] eq ""} { error "timing: --$key is required" }
    }
    if {[llength [dict get $a parts]] == 0} { dict set a parts [dict keys $parts] }
    foreach key {rtl work} { dict set a $key [file normalize [dict get $a $key]] }
    return $a
}

# One part: synthesized out of context, constrained, placed, routed,
# reported; returns its line of timing.tsv.
proc fabric::timing::run_part {name board src work} {
    variable parts
    set spec [dict get $parts $name]
    set module [dict get $spec module]
    set part [dict get $board part]
    set period [format %.3f [expr {1000.0 / [dict get $board clk_mhz]}]]
    set generics {}
    foreach g [dict get $spec generics] {
        switch -- $g {
            CLK_MHZ { lappend generics -generic CLK_MHZ=[dict get $board clk_mhz] }
            DAW { lappend generics -generic DAW=[dict get $board dma_addr_bits] }
        }
    }
    say "$name ($module) out of context in $part at $period ns"
    create_project -in_memory -part $part
    # The board's top is the flow's, not a part's: it names the PS's block
    # design, which only the flow generates.
    read_sources [lsearch -all -inline -not -glob [dict get $src [dict get $spec sources]] */top/*]
    synth_design -mode out_of_context -top $module -part $part \
        -include_dirs [dict get $src incdirs] {*}$generics
    create_clock -period $period -name clk [get_ports clk]
    opt_design
    place_design
    route_design
    set timing [file join $work ${name}_timing.rpt]
    report_timing_summary -file $timing
    report_design_analysis -logic_level_distribution -file [file join $work ${name}_levels.rpt]
    report_utilization -file [file join $work ${name}_utilization.rpt]
    set wns [get_property SLACK [get_timing_paths -setup -max_paths 1 -nworst 1]]
    set whs [get_property SLACK [get_timing_paths -hold -max_paths 1 -nworst 1]]
    close_project
    foreach {kind slack} [list setup $wns hold $whs] {
        if {$slack ne "" && $slack < 0} {
            error "timing: $name misses $kind timing at $period ns (worst slack $slack ns): see $timing"
        }
    }
    return [join [list $name $module $period $wns $whs] \t]
}

proc fabric::timing::main {argv} {
    variable dir
    set opt [parse $argv]
    set board_file [file join $dir boards [dict get $opt board].tcl]
    if {![file exists $board_file]} {
        error "timing: no board '[dict get $opt board]' (boards: [join [lmap f [glob -directory [file join $dir boards] *.tcl] {file rootname [file tail $f]}] {, }])"
    }
    set ::fabric::board {}
    source $board_file
    set board $::fabric::board
    set src [::fabric::sources [dict get $opt rtl]]
    set work [dict get $opt work]
    file mkdir $work
    set lines {}
    foreach name [dict get $opt parts] {
        lappend lines [run_part $name $board $src $work]
    }
    set f [open [file join $work timing.tsv] w]
    puts $f [join {part module period_ns wns_ns whs_ns} \t]
    foreach line $lines { puts $f $line }
    close $f
    say "done: [file join $work timing.tsv]"
}

fabric::timing::main $argv
