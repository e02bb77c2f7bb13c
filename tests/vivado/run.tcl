# SPDX-License-Identifier: MIT OR Apache-2.0
#
# What tests/vivado/vivado runs under tclsh: the stubs, then the -source
# script with -tclargs as its argv, as Vivado's batch mode would. An error
# ends it with status 1 and the message on stderr, as Vivado does.

set here [file dirname [file normalize [info script]]]
set ::argv [lassign $::argv script]
set ::argc [llength $::argv]
set ::argv0 vivado
source [file join $here stubs.tcl]
if {[catch {source $script} err]} {
    puts stderr "ERROR: $err"
    exit 1
}
exit 0
