# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The Kria KV260: its K26 SOM's Zynq UltraScale+ (xck26-sfvc784-2LV-c).
# Addresses and the interrupt are device-tree/fabricd-shell-kv260.dtso's;
# bd/ps_kv260.tcl makes the PS side match them.

dict set ::fabric::board name kv260
dict set ::fabric::board part xck26-sfvc784-2LV-c
# The fabric's clock, pl_clk0, in MHz: the shell's CLK_MHZ.
dict set ::fabric::board clk_mhz 200
# Address bits of the HP port (S_AXI_HP0_FPD reaches DDR above 4 GiB): the
# shell's DAW.
dict set ::fabric::board dma_addr_bits 40
