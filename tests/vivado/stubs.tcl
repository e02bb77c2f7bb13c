# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Vivado, as far as rtl/vivado/ uses it, for tests/vivado-flow.sh. Each
# command the flow calls is a proc here that appends the call to the log
# ($env(VIVADO_STUB_LOG), one call a line), refuses what the real
# command refuses, and does what the flow relies on: returns the object the
# real command would, writes the file it would write, and keeps the state
# its rules need (the open design, its cells, what is placed, routed and
# locked). Each rule names where Xilinx documents it: UG835 (the Tcl
# command reference), UG909 (Dynamic Function eXchange), UG994 (block
# designs). An option a command does not take is refused, as Vivado does.
#
# Any command not defined here fails (see `unknown` at the end), so the
# stubs cannot silently fall behind the flow: a new command in the flow
# needs a stub, with its rules, before the test passes again.
#
# Not modelled: the RTL (nothing here parses Verilog: the board top's
# reconfigurable cells are $env(VIVADO_STUB_RP_CELLS), default slot0.rm and
# slot1.rm, black boxes of fabric_slot, as tests/vivado-flow.sh checks with
# Yosys that rtl/top/fabric_top.v has them, and fabric_top is taken to pass
# its DAW to each, as it does), the IP catalog's pins, placement,
# timing (every path has the slack $env(VIVADO_STUB_SLACK), default
# positive), the bitstream's contents (a stub image is a few lines of text
# with the header fields fabricd checks).

namespace eval stub {
    variable log $::env(VIVADO_STUB_LOG)
    variable rp_cells [expr {[info exists ::env(VIVADO_STUB_RP_CELLS)] ? $::env(VIVADO_STUB_RP_CELLS) : {slot0.rm slot1.rm}}]
    variable rp_module fabric_slot
    variable slack [expr {[info exists ::env(VIVADO_STUB_SLACK)] ? $::env(VIVADO_STUB_SLACK) : 0.125}]
    variable project {}   ;# the in-memory project: part, files, bd, generated
    variable design {}    ;# the open design (see new_design)
    variable pending_xdc {}
    variable serial 0
}

# One call a line: the command and its arguments, an argument with spaces
# (a list) in braces and nothing else quoted, so that a line reads as the
# call was written.
proc stub::record {cmd argv} {
    variable log
    set words [list $cmd]
    foreach a $argv {
        if {$a eq "" || [regexp {\s} $a]} { set a "{$a}" }
        lappend words $a
    }
    set f [open $log a]
    puts $f [join $words]
    close $f
}

proc stub::fail {cmd msg} {
    error "vivado stub: $cmd: $msg"
}

# Parses ARGV by SPEC (option -> 0 for a flag, 1 for a value, * for a
# repeatable value) into a dict of the options given plus `args`, the
# positional arguments.
proc stub::parse {cmd spec argv} {
    set out [dict create args {}]
    while {[llength $argv] > 0} {
        set argv [lassign $argv a]
        if {[string match -* $a] && ![string is double -strict $a]} {
            # Vivado takes a unique prefix of an option (UG835 writes
            # update_design -cells; UG909 writes -cell).
            set matches [lsearch -all -inline -glob [dict keys $spec] $a*]
            if {[dict exists $spec $a]} { set matches [list $a] }
            if {[llength $matches] != 1} {
                fail $cmd "no option $a (it takes [join [dict keys $spec] {, }])"
            }
            set name [lindex $matches 0]
            set arity [dict get $spec $name]
            if {$arity eq "0"} {
                dict set out $name 1
                continue
            }
            if {[llength $argv] == 0} { fail $cmd "option $name needs a value" }
            set argv [lassign $argv value]
            if {$arity eq "*"} {
                dict lappend out $name $value
            } else {
                dict set out $name $value
            }
        } else {
            dict lappend out args $a
        }
    }
    return $out
}

# Defines a stub: the proc records its call, parses its options into `o`
# and runs BODY.
proc stub::def {name spec body} {
    proc ::$name {args} [string map [list @NAME@ $name @SPEC@ [list $spec]] {
        stub::record @NAME@ $args
        set o [stub::parse @NAME@ @SPEC@ $args]
    }]$body
}

proc stub::need_project {cmd} {
    variable project
    if {$project eq ""} { fail $cmd "no project is open (create_project -in_memory first)" }
}

proc stub::need_design {cmd} {
    variable design
    if {$design eq ""} { fail $cmd "no design is open" }
}

proc stub::need_file {cmd path} {
    if {![file isfile $path]} { fail $cmd "no file $path" }
}

# Writes FILE unless it exists and -force was not given (UG835, -force:
# "Overwrite existing file").
proc stub::write_file {cmd o file text} {
    if {[file exists $file] && ![dict exists $o -force]} {
        fail $cmd "$file exists (use -force to overwrite it)"
    }
    file mkdir [file dirname $file]
    set f [open $file w]
    puts -nonewline $f $text
    close $f
}

proc stub::new_design {name part mode} {
    return [dict create name $name part $part mode $mode generics {} cells {} \
        placed 0 routed 0 locked 0 static "" props {} pblocks {} clocks {}]
}

proc stub::cell {cmd name} {
    variable design
    if {![dict exists $design cells $name]} {
        fail $cmd "no cell $name in design [dict get $design name]"
    }
    return [dict get $design cells $name]
}

proc stub::black_boxes {} {
    variable design
    set out {}
    dict for {name c} [dict get $design cells] {
        if {[dict get $c content] eq "black_box"} { lappend out $name }
    }
    return $out
}

proc stub::reconfigurable {} {
    variable design
    set out {}
    dict for {name c} [dict get $design cells] {
        if {[dict get $c reconfigurable]} { lappend out $name }
    }
    return $out
}

# UG835 opt_design and place_design: "ERROR: [DRC INBB-3] Black Box
# Instances: Cell ... has undefined contents and is considered a black box".
proc stub::no_black_boxes {cmd} {
    set bb [black_boxes]
    if {[llength $bb]} {
        fail $cmd "\[DRC INBB-3\] black box instances: $bb (read a module into each, or update_design -buffer_ports)"
    }
}

# ---- projects, sources, synthesis -------------------------------------

stub::def create_project {-in_memory 0 -part 1 -force 0} {
    if {$stub::project ne ""} { stub::fail create_project "a project is already open" }
    if {![dict exists $o -in_memory]} { stub::fail create_project "the flow is non-project: -in_memory" }
    set stub::project [dict create part [expr {[dict exists $o -part] ? [dict get $o -part] : ""}] \
        files {} bd "" generated 0 props {}]
    return in_memory
}

stub::def close_project {} {
    stub::need_project close_project
    set stub::project {}
    set stub::design {}
    set stub::pending_xdc {}
}

stub::def current_project {} {
    stub::need_project current_project
    return in_memory
}

stub::def current_design {} {
    stub::need_design current_design
    return [dict get $stub::design name]
}

stub::def read_verilog {-sv 0 -library 1} {
    stub::need_project read_verilog
    foreach file [concat {*}[dict get $o args]] {
        stub::need_file read_verilog $file
        dict lappend stub::project files $file
    }
}

# XDC is Tcl, a subset (UG903): evaluated here in a safe interpreter whose
# only commands beyond the core are the stubs of the XDC commands, so a
# constraint file that calls anything else fails as it would in Vivado.
proc stub::eval_xdc {file} {
    set i [interp create -safe]
    foreach cmd {create_pblock add_cells_to_pblock resize_pblock get_pblocks get_cells
                 set_property create_clock get_ports} {
        interp alias $i $cmd {} ::$cmd
    }
    set f [open $file]
    set text [read $f]
    close $f
    set code [catch {$i eval $text} err]
    interp delete $i
    if {$code} { fail read_xdc "$file: $err" }
}

stub::def read_xdc {-mode 1 -cells 1 -ref 1 -unmanaged 0} {
    set file [lindex [dict get $o args] 0]
    stub::need_file read_xdc $file
    if {$stub::design eq ""} {
        # Read into the project, applied when synth_design opens a design.
        stub::need_project read_xdc
        lappend stub::pending_xdc $file
    } else {
        stub::eval_xdc $file
    }
}

# Whether module NAME is defined only as a black box among FILES (UG901,
# "Black Boxes": `(* black_box *) module ...`), defined, or not at all.
proc stub::module_kind {files name} {
    set kind missing
    foreach file $files {
        set f [open $file]
        set text [read $f]
        close $f
        regsub -all {//[^\n]*} $text {} text
        if {[regexp "(\\(\\*\\s*black_box\\s*\\*\\)\\s*)?module\\s+$name\\M" $text all bb]} {
            if {$bb eq ""} { return module }
            set kind black_box
        }
    }
    return $kind
}

stub::def synth_design {-top 1 -part 1 -mode 1 -generic * -include_dirs 1 -flatten_hierarchy 1
                        -verilog_define * -directive 1 -name 1} {
    stub::need_project synth_design
    if {![dict exists $o -top]} { stub::fail synth_design "non-project synthesis needs -top" }
    set part [expr {[dict exists $o -part] ? [dict get $o -part] : [dict get $stub::project part]}]
    if {$part eq ""} { stub::fail synth_design "no -part and the project has none" }
    if {[dict exists $o -include_dirs]} {
        foreach d [dict get $o -include_dirs] {
            if {![file isdirectory $d]} { stub::fail synth_design "no include directory $d" }
        }
    }
    set files [dict get $stub::project files]
    if {[llength $files] == 0} { stub::fail synth_design "no sources read" }
    set top [dict get $o -top]
    set mode [expr {[dict exists $o -mode] ? [dict get $o -mode] : "default"}]
    if {$mode ni {default out_of_context}} { stub::fail synth_design "-mode $mode" }
    if {[stub::module_kind $files $top] ne "module"} {
        stub::fail synth_design "\[Synth 8-439\] module '$top' not found"
    }
    set d [stub::new_design $top $part $mode]
    foreach g [expr {[dict exists $o -generic] ? [dict get $o -generic] : {}}] {
        if {![regexp {^([A-Za-z_][A-Za-z0-9_]*)=(.*)$} $g -> gname value]} {
            stub::fail synth_design "-generic $g is not NAME=VALUE"
        }
        # Stricter than Vivado, on purpose: a value is a decimal integer
        # (the fabric's parameters are all integers: ENGINE, DAW, CLK_MHZ)
        # or a quoted string, and a generic is given once. Anything else
        # (0x..., Verilog's 32'h..., a second value that would silently win)
        # is refused whether or not Vivado takes it, so the flow keeps to
        # the plainest form.
        if {![regexp {^([0-9]+|".*")$} $value]} {
            stub::fail synth_design "-generic $gname=$value is not a decimal integer or a quoted string"
        }
        if {[dict exists $d generics $gname]} { stub::fail synth_design "-generic $gname given twice" }
        dict set d generics $gname $value
    }
    if {$mode ne "out_of_context"} {
        # A block design's module exists once generate_target has run.
        set bd [dict get $stub::project bd]
        if {$bd ne "" && ![dict get $stub::project generated]} {
            stub::fail synth_design "\[Synth 8-439\] module '[file rootname [file tail $bd]]' not found (generate_target the block design first)"
        }
        foreach cell $stub::rp_cells {
            set kind [stub::module_kind $files $stub::rp_module]
            if {$kind eq "missing"} {
                stub::fail synth_design "\[Synth 8-439\] module '$stub::rp_module' not found (cell $cell)"
            }
            dict set d cells $cell [dict create content $kind ref $stub::rp_module module {} \
                reconfigurable 0 pblock ""]
        }
    }
    set stub::design $d
    foreach file $stub::pending_xdc { stub::eval_xdc $file }
    set stub::pending_xdc {}
    return $top
}

# ---- checkpoints ---------------------------------------------------------

stub::def write_checkpoint {-force 0 -cell 1} {
    stub::need_design write_checkpoint
    set file [lindex [dict get $o args] 0]
    stub::write_file write_checkpoint $o $file [list vivado-stub-checkpoint $stub::design]
    return $file
}

proc stub::load_checkpoint {cmd file} {
    need_file $cmd $file
    set f [open $file]
    set text [read $f]
    close $f
    if {[lindex $text 0] ne "vivado-stub-checkpoint"} { fail $cmd "$file is not a checkpoint" }
    return [lindex $text 1]
}

stub::def open_checkpoint {} {
    if {$stub::design ne "" || $stub::project ne ""} {
        stub::fail open_checkpoint "the stubs keep one design open: close_design or close_project first"
    }
    set stub::design [stub::load_checkpoint open_checkpoint [lindex [dict get $o args] 0]]
    return [dict get $stub::design name]
}

# UG835 read_checkpoint -cell: "Replace this cell with the checkpoint. The
# cell must be a black box." UG905: a checkpoint is read only into its own
# part.
stub::def read_checkpoint {-cell 1 -strict 0 -incremental 1} {
    stub::need_design read_checkpoint
    set file [lindex [dict get $o args] 0]
    set rm [stub::load_checkpoint read_checkpoint $file]
    if {![dict exists $o -cell]} { stub::fail read_checkpoint "the flow reads modules with -cell" }
    set cell [dict get $o -cell]
    set c [stub::cell read_checkpoint $cell]
    if {[dict get $c content] ne "black_box"} {
        stub::fail read_checkpoint "cell $cell is not a black box (its content: [dict get $c content])"
    }
    if {[dict get $rm mode] ne "out_of_context"} {
        stub::fail read_checkpoint "$file was not synthesized out of context"
    }
    if {[dict get $rm part] ne [dict get $stub::design part]} {
        stub::fail read_checkpoint "$file is for [dict get $rm part], the design for [dict get $stub::design part]"
    }
    # UG909, "Synthesizing Reconfigurable Modules": every module of a
    # partition is instantiated in the same black box, so "the name of the
    # block must be the same in each instance".
    if {[dict get $rm name] ne [dict get $c ref]} {
        stub::fail read_checkpoint "$file's top is [dict get $rm name], cell $cell is a black box of [dict get $c ref]: a reconfigurable module has its partition's module name (UG909)"
    }
    # UG909: a reconfigurable module's ports are its partition's. The stubs
    # read no Verilog: the ports' widths follow DAW, which fabric_top passes
    # to each cell, so a module must have been synthesized with the static's.
    set daw [expr {[dict exists $stub::design generics DAW] ? [dict get $stub::design generics DAW] : "(none: the default)"}]
    set rm_daw [expr {[dict exists $rm generics DAW] ? [dict get $rm generics DAW] : "(none: the default)"}]
    if {$rm_daw ne $daw} {
        stub::fail read_checkpoint "$file was synthesized with DAW $rm_daw, cell $cell's ports have DAW $daw (the static's): the module's ports are not the partition's"
    }
    dict set c content module
    dict set c module [dict create checkpoint $file top [dict get $rm name] generics [dict get $rm generics]]
    dict set stub::design cells $cell $c
    dict set stub::design routed 0
}

stub::def close_design {} {
    stub::need_design close_design
    set stub::design {}
}

# ---- objects and properties --------------------------------------------

stub::def get_cells {-hierarchical 0 -quiet 0 -filter 1} {
    stub::need_design get_cells
    set out {}
    foreach pattern [concat {*}[dict get $o args]] {
        foreach name [dict keys [dict get $stub::design cells]] {
            if {[string match $pattern $name]} { lappend out $name }
        }
    }
    return $out
}

stub::def get_ports {-quiet 0 -filter 1} {
    stub::need_design get_ports
    return [dict get $o args]
}

stub::def create_clock {-period 1 -name 1 -waveform 1 -add 0} {
    stub::need_design create_clock
    if {![string is double -strict [dict get $o -period]] || [dict get $o -period] <= 0} {
        stub::fail create_clock "-period [dict get $o -period]"
    }
    dict lappend stub::design clocks [list [dict get $o -name] [dict get $o -period]]
}

stub::def create_pblock {} {
    stub::need_design create_pblock
    set name [lindex [dict get $o args] 0]
    dict set stub::design pblocks $name [dict create cells {} ranges {} props {}]
    return $name
}

stub::def get_pblocks {-quiet 0} {
    stub::need_design get_pblocks
    set out {}
    foreach pattern [dict get $o args] {
        foreach name [dict keys [dict get $stub::design pblocks]] {
            if {[string match $pattern $name]} { lappend out $name }
        }
    }
    return $out
}

stub::def add_cells_to_pblock {-top 0 -add_primitives 0 -clear_locs 0} {
    stub::need_design add_cells_to_pblock
    lassign [dict get $o args] pblock cells
    if {![dict exists $stub::design pblocks $pblock]} { stub::fail add_cells_to_pblock "no pblock '$pblock'" }
    if {[llength $cells] == 0} { stub::fail add_cells_to_pblock "no cells for $pblock" }
    foreach cell $cells {
        set c [stub::cell add_cells_to_pblock $cell]
        dict set c pblock $pblock
        dict set stub::design cells $cell $c
        dict set stub::design pblocks $pblock cells [concat [dict get $stub::design pblocks $pblock cells] $cell]
    }
}

stub::def resize_pblock {-add * -remove * -from * -to * -replace 0 -locs 1} {
    stub::need_design resize_pblock
    set pblock [lindex [dict get $o args] 0]
    if {![dict exists $stub::design pblocks $pblock]} { stub::fail resize_pblock "no pblock '$pblock'" }
    foreach r [concat {*}[dict get $o -add]] {
        if {![regexp {^[A-Z0-9]+_X\d+Y\d+:[A-Z0-9]+_X\d+Y\d+$} $r]} {
            stub::fail resize_pblock "range $r is not SITE_XaYb:SITE_XcYd"
        }
        dict set stub::design pblocks $pblock ranges [concat [dict get $stub::design pblocks $pblock ranges] $r]
    }
}

# set_property NAME VALUE OBJECTS or set_property -dict {NAME VALUE ...}
# OBJECTS; an object is a cell, a pblock or the design (its name, from
# current_design), a block-design object (/...), a file, or the project.
stub::def set_property {-dict 1 -quiet 0} {
    set pos [dict get $o args]
    if {[dict exists $o -dict]} {
        set props [dict get $o -dict]
        set objects [concat {*}$pos]
    } else {
        if {[llength $pos] < 3} { stub::fail set_property "needs NAME VALUE OBJECTS" }
        set props [lrange $pos 0 1]
        set objects [concat {*}[lrange $pos 2 end]]
    }
    if {[llength $objects] == 0} { stub::fail set_property "\[Common 17-55\] 'set_property' expects at least one object" }
    foreach obj $objects {
        dict for {name value} $props { stub::set_one $obj $name $value }
    }
}

proc stub::set_one {obj name value} {
    variable design
    variable project
    if {$design ne "" && $obj eq [dict get $design name]} {
        if {$name eq "BITSTREAM.CONFIG.USERID" && ![regexp -nocase {^(0x|32'h)[0-9a-f]{8}$} $value]} {
            fail set_property "BITSTREAM.CONFIG.USERID $value is not an 8-digit hex value"
        }
        dict set design props $name $value
    } elseif {$design ne "" && [dict exists $design cells $obj]} {
        if {$name ne "HD.RECONFIGURABLE"} { fail set_property "cell property $name is not modelled" }
        dict set design cells $obj reconfigurable [string is true -strict $value]
    } elseif {$design ne "" && [dict exists $design pblocks $obj]} {
        dict set design pblocks $obj props $name $value
    } elseif {[string match /* $obj]} {
        need_project set_property
        if {[dict get $project bd] eq ""} { fail set_property "no block design for $obj" }
    } elseif {$obj eq "in_memory"} {
        need_project set_property
        dict set project props $name $value
    } elseif {$project ne "" && $obj in [list [dict get $project bd]]} {
        if {$name ne "synth_checkpoint_mode" || $value ni {None Singular Hierarchical}} {
            fail set_property "$name $value on a block design"
        }
    } else {
        fail set_property "no object '$obj'"
    }
}

stub::def get_property {-quiet 0} {
    lassign [dict get $o args] name obj
    if {[string match timing_path* $obj] && $name eq "SLACK"} { return $stub::slack }
    stub::need_design get_property
    if {$obj eq [dict get $stub::design name] && [dict exists $stub::design props $name]} {
        return [dict get $stub::design props $name]
    }
    stub::fail get_property "$name of $obj is not modelled"
}

stub::def get_timing_paths {-setup 0 -hold 0 -max_paths 1 -nworst 1 -quiet 0} {
    stub::need_design get_timing_paths
    if {![dict get $stub::design routed]} { stub::fail get_timing_paths "the flow reads slack after routing" }
    return timing_path_1
}

# ---- implementation ------------------------------------------------------

stub::def opt_design {-directive 1} {
    stub::need_design opt_design
    stub::no_black_boxes opt_design
}

# UG909: every reconfigurable partition needs a Pblock. A static that is
# not locked is placed afresh (a new "static"), which pr_verify then finds
# different from the first configuration's.
stub::def place_design {-directive 1} {
    stub::need_design place_design
    stub::no_black_boxes place_design
    foreach cell [stub::reconfigurable] {
        if {[dict get $stub::design cells $cell pblock] eq ""} {
            stub::fail place_design "reconfigurable cell $cell has no Pblock (UG909: each RP needs one)"
        }
    }
    if {![dict get $stub::design locked]} {
        dict set stub::design static "static-[incr stub::serial]"
    }
    dict set stub::design placed 1
}

stub::def route_design {-directive 1} {
    stub::need_design route_design
    if {![dict get $stub::design placed]} { stub::fail route_design "the design is not placed" }
    dict set stub::design routed 1
}

# UG909: update_design -black_box empties a cell; -buffer_ports makes a grey
# box of a black box (its outputs driven by LUTs).
stub::def update_design {-cells 1 -black_box 0 -buffer_ports 0} {
    stub::need_design update_design
    set cell [dict get $o -cells]
    set c [stub::cell update_design $cell]
    if {[dict exists $o -black_box]} {
        dict set c content black_box
        dict set c module {}
    } elseif {[dict exists $o -buffer_ports]} {
        if {[dict get $c content] ne "black_box"} { stub::fail update_design "-buffer_ports: $cell is not a black box" }
        dict set c content buffered
    } else {
        stub::fail update_design "neither -black_box nor -buffer_ports"
    }
    dict set stub::design cells $cell $c
}

# UG909, "Preserving Implementation Data": "For Dynamic Function eXchange,
# the only supported preservation level is routing"; UG835: it locks placed
# cells and routed nets.
stub::def lock_design {-level 1 -unlock 0} {
    stub::need_design lock_design
    if {[dict get $o -level] ne "routing"} { stub::fail lock_design "DFX supports -level routing only" }
    if {![dict get $stub::design routed]} { stub::fail lock_design "nothing routed to lock" }
    dict set stub::design locked 1
}

# UG909, "Verifying Configurations": routed checkpoints of full
# configurations, the static and the partition pins the same in all.
stub::def pr_verify {-initial 1 -additional 1 -file 1 -full_check 0 -in_memory 0 -quiet 0} {
    if {[dict exists $o -initial]} {
        set dcps [concat [list [dict get $o -initial]] [dict get $o -additional]]
    } else {
        set dcps [dict get $o args]
    }
    if {[llength $dcps] < 2} { stub::fail pr_verify "needs two configurations or more" }
    set first {}
    foreach dcp $dcps {
        set d [stub::load_checkpoint pr_verify $dcp]
        if {![dict get $d routed] || [dict get $d mode] ne "default"} {
            stub::fail pr_verify "$dcp is not a routed full configuration"
        }
        set rps [lsort [dict keys [dict filter [dict get $d cells] script {k c} {dict get $c reconfigurable}]]]
        if {[llength $rps] == 0} { stub::fail pr_verify "$dcp has no reconfigurable cell" }
        if {$first eq ""} {
            set first [list $dcp [dict get $d static] $rps [dict get $d part]]
            continue
        }
        lassign $first fdcp fstatic frps fpart
        if {[dict get $d static] ne $fstatic} {
            stub::fail pr_verify "the static of $dcp differs from $fdcp's (was it locked with lock_design -level routing before this configuration?)"
        }
        if {$rps ne $frps || [dict get $d part] ne $fpart} {
            stub::fail pr_verify "$dcp's partitions or part differ from $fdcp's"
        }
    }
    if {[dict exists $o -file]} {
        set f [open [dict get $o -file] w]
        puts $f "PR_VERIFY: [llength $dcps] checkpoints are compatible (stub)"
        close $f
    }
}

# A stub image: text with the fields fabricd reads from a .bit header
# (field 'a': design;PARTIAL=TRUE;UserID=...; field 'b': the part) and
# what the slots held: a line per cell, "cell NAME CONTENT", and for a
# module its checkpoint and the generics it was synthesized with.
proc stub::image_text {partial cells} {
    variable design
    set userid 0XFFFFFFFF
    if {[dict exists $design props BITSTREAM.CONFIG.USERID]} {
        set userid [string toupper [regsub -nocase {^(0x|32'h)} [dict get $design props BITSTREAM.CONFIG.USERID] 0X]]
    }
    set a "[dict get $design name][expr {$partial ? {;PARTIAL=TRUE} : {}}];UserID=$userid;Version=stub"
    set text "vivado stub bitstream\na $a\nb [dict get $design part]\n"
    foreach cell $cells {
        set c [dict get $design cells $cell]
        set line "cell $cell [dict get $c content]"
        if {[dict get $c content] eq "module"} {
            append line " [file tail [dict get $c module checkpoint]]"
            dict for {name value} [dict get $c module generics] { append line " $name=$value" }
        }
        append text "$line\n"
    }
    return $text
}

# UG835: run on an implemented (routed) design. UG909, "Bitstream
# Creation": -cell writes only that cell's partial image, and partial
# images exist only for cells with HD.RECONFIGURABLE; without -cell and
# -no_partial_bitfile a partial image per RP is written beside the full one,
# named <file>_pblock_<pblock>_partial.bit.
stub::def write_bitstream {-force 0 -cell 1 -no_partial_bitfile 0 -bin_file 0 -raw_bitfile 0
                           -no_binary_bitfile 0 -mask_file 0 -logic_location_file 0 -verbose 0} {
    stub::need_design write_bitstream
    if {![dict get $stub::design routed]} { stub::fail write_bitstream "the design is not routed" }
    set file [lindex [dict get $o args] 0]
    if {[file extension $file] ne ".bit"} { append file .bit }
    if {[dict exists $o -cell]} {
        set cell [dict get $o -cell]
        set c [stub::cell write_bitstream $cell]
        if {![dict get $c reconfigurable]} {
            stub::fail write_bitstream "-cell $cell: not a reconfigurable cell (no HD.RECONFIGURABLE)"
        }
        if {[dict get $c content] eq "black_box"} { stub::fail write_bitstream "-cell $cell is a black box" }
        stub::write_file write_bitstream $o $file [stub::image_text 1 [list $cell]]
        return
    }
    stub::no_black_boxes write_bitstream
    stub::write_file write_bitstream $o $file [stub::image_text 0 [dict keys [dict get $stub::design cells]]]
    if {![dict exists $o -no_partial_bitfile]} {
        foreach cell [stub::reconfigurable] {
            set pb [dict get $stub::design cells $cell pblock]
            stub::write_file write_bitstream $o "[file rootname $file]_${pb}_partial.bit" \
                [stub::image_text 1 [list $cell]]
        }
    }
}

# UG835 write_cfgmem: -format and -interface are required; -loadbit
# "up <address> <file.bit>".
stub::def write_cfgmem {-force 0 -format 1 -interface 1 -size 1 -disablebitswap 0 -loadbit 1
                        -file 1 -checksum 0 -verbose 0} {
    foreach opt {-format -interface -loadbit -file} {
        if {![dict exists $o $opt]} { stub::fail write_cfgmem "$opt is required" }
    }
    lassign [dict get $o -loadbit] dir addr bit
    if {$dir ni {up down} || ![string is integer -strict $addr]} {
        stub::fail write_cfgmem "-loadbit '[dict get $o -loadbit]' is not \"up ADDRESS FILE\""
    }
    stub::need_file write_cfgmem $bit
    set f [open $bit]
    set text [read $f]
    close $f
    stub::write_file write_cfgmem $o [dict get $o -file] \
        "vivado stub cfgmem [dict get $o -format] [dict get $o -interface] [expr {[dict exists $o -disablebitswap] ? {disablebitswap} : {bitswap}}]\n$text"
}

foreach report {report_utilization report_timing_summary report_route_status} {
    stub::def $report {-file 1 -pblocks 1 -hierarchical 0 -cells 1 -max_paths 1 -return_string 0 -quiet 0} {
        stub::need_design report
        if {[dict exists $o -file]} {
            set f [open [dict get $o -file] w]
            puts $f "vivado stub report of [dict get $stub::design name]"
            close $f
        }
    }
}

# UG835: the distribution of the paths' logic levels is what
# report_failfast summarises; -logic_level_distribution reports it.
stub::def report_design_analysis {-logic_level_distribution 0 -timing 0 -file 1 -max_paths 1
                                  -return_string 0 -quiet 0} {
    stub::need_design report_design_analysis
    if {![dict get $stub::design routed] && ![dict get $stub::design placed]} {
        stub::fail report_design_analysis "the flow reads logic levels after placement"
    }
    if {[dict exists $o -file]} {
        set f [open [dict get $o -file] w]
        puts $f "vivado stub design analysis of [dict get $stub::design name]"
        close $f
    }
}

# ---- block designs (UG994) -------------------------------------------------

proc stub::need_bd {cmd} {
    variable project
    need_project $cmd
    if {[dict get $project bd] eq ""} { fail $cmd "no block design is open" }
}

stub::def create_bd_design {-dir 1 -bdsource 1} {
    stub::need_project create_bd_design
    set name [lindex [dict get $o args] 0]
    set dir [expr {[dict exists $o -dir] ? [dict get $o -dir] : [pwd]}]
    set bd [file join $dir $name $name.bd]
    file mkdir [file dirname $bd]
    set f [open $bd w]
    puts $f "vivado stub block design $name"
    close $f
    dict set stub::project bd $bd
    dict set stub::project bd_cells {}
    dict set stub::project bd_ports {}
    return $name
}

# The processing system must be the part's: zynq_ultra_ps_e on Zynq
# UltraScale+ (xczu*, xck26), processing_system7 on Zynq-7000 (xc7z*).
stub::def create_bd_cell {-type 1 -vlnv 1 -reference 1} {
    stub::need_bd create_bd_cell
    set name [lindex [dict get $o args] 0]
    set vlnv [dict get $o -vlnv]
    if {![regexp {^xilinx\.com:ip:([a-z0-9_]+):[0-9.*]+$} $vlnv -> ip]} {
        stub::fail create_bd_cell "-vlnv $vlnv is not xilinx.com:ip:NAME:VERSION"
    }
    set part [dict get $stub::project part]
    set ps {zynq_ultra_ps_e {^xc(zu|k26)} processing_system7 {^xc7z}}
    if {[dict exists $ps $ip] && ![regexp [dict get $ps $ip] $part]} {
        stub::fail create_bd_cell "$ip is not the processing system of $part"
    }
    if {$ip ni {zynq_ultra_ps_e processing_system7 proc_sys_reset smartconnect}} {
        stub::fail create_bd_cell "IP $ip is not modelled"
    }
    dict set stub::project bd_cells $name $ip
    return /$name
}

proc stub::bd_objects {cmd patterns} {
    variable project
    need_bd $cmd
    set out {}
    foreach p [concat {*}$patterns] {
        set p [string trimleft $p /]
        set owner [lindex [split $p /] 0]
        if {[dict exists $project bd_cells $owner] || [dict exists $project bd_ports $owner]} {
            lappend out /$p
        }
    }
    return $out
}

foreach cmd {get_bd_cells get_bd_pins get_bd_intf_pins get_bd_ports get_bd_intf_ports
             get_bd_addr_spaces get_bd_addr_segs} {
    stub::def $cmd {-quiet 0 -of_objects 1 -filter 1} [string map [list @CMD@ $cmd] {
        return [stub::bd_objects @CMD@ [dict get $o args]]
    }]
}

stub::def create_bd_port {-dir 1 -type 1 -from 1 -to 1 -freq_hz 1} {
    stub::need_bd create_bd_port
    set name [lindex [dict get $o args] 0]
    if {[dict get $o -dir] ni {I O IO}} { stub::fail create_bd_port "-dir [dict get $o -dir]" }
    dict set stub::project bd_ports $name port
    return /$name
}

stub::def create_bd_intf_port {-mode 1 -vlnv 1} {
    stub::need_bd create_bd_intf_port
    set name [lindex [dict get $o args] 0]
    if {[dict get $o -mode] ni {Master Slave}} { stub::fail create_bd_intf_port "-mode [dict get $o -mode]" }
    dict set stub::project bd_ports $name intf
    return /$name
}

stub::def connect_bd_net {-net 1} {
    stub::need_bd connect_bd_net
    set objs [concat {*}[dict get $o args]]
    if {[llength $objs] < 2} { stub::fail connect_bd_net "needs two objects or more, got '$objs'" }
}

stub::def connect_bd_intf_net {} {
    stub::need_bd connect_bd_intf_net
    set objs [concat {*}[dict get $o args]]
    if {[llength $objs] != 2} { stub::fail connect_bd_intf_net "needs two interfaces, got '$objs'" }
}

stub::def assign_bd_address {-offset 1 -range 1 -target_address_space 1 -force 0} {
    stub::need_bd assign_bd_address
    if {[dict exists $o -offset] && ![string is wideinteger -strict [dict get $o -offset]]} {
        stub::fail assign_bd_address "-offset [dict get $o -offset]"
    }
    if {[llength [concat {*}[dict get $o args]]] == 0} { stub::fail assign_bd_address "no segments" }
}

stub::def validate_bd_design {-force 0} { stub::need_bd validate_bd_design }
stub::def save_bd_design {} { stub::need_bd save_bd_design }

stub::def get_files {-quiet 0 -of_objects 1 -all 0} {
    stub::need_project get_files
    set out {}
    foreach pattern [dict get $o args] {
        foreach file [concat [dict get $stub::project files] [list [dict get $stub::project bd]]] {
            if {$file ne "" && ([string match $pattern $file] || [string match $pattern [file tail $file]])} {
                lappend out $file
            }
        }
    }
    return $out
}

stub::def generate_target {-force 0 -quiet 0} {
    stub::need_project generate_target
    lassign [dict get $o args] name files
    if {$name ne "all"} { stub::fail generate_target "the flow generates all targets" }
    if {[llength $files] == 0 || [lindex $files 0] ne [dict get $stub::project bd]} {
        stub::fail generate_target "not a block design of this project: '$files'"
    }
    dict set stub::project generated 1
}

# ---- anything else -----------------------------------------------------

rename unknown stub::tcl_unknown
proc unknown {cmd args} {
    # Tcl's own lazily loaded commands (namespaced) still load.
    if {[string match *::* $cmd]} { return [uplevel 1 [list stub::tcl_unknown $cmd {*}$args]] }
    stub::record $cmd $args
    error "vivado stub: '$cmd' is not stubbed: add it to tests/vivado/stubs.tcl with the rules UG835 gives it, or fix the flow"
}
