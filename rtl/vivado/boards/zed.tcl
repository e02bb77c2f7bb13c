# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The ZedBoard: a Zynq-7000 XC7Z020 (xc7z020clg484-1). Addresses and the
# interrupt are device-tree/zynq-7000-shell.dtsi's (included by
# fabricd-shell-zed.dtso); bd/ps_zed.tcl makes the PS side match them.

dict set ::fabric::board name zed
dict set ::fabric::board part xc7z020clg484-1
# The fabric's clock, FCLK_CLK0, in MHz: the shell's CLK_MHZ.
dict set ::fabric::board clk_mhz 100
# Address bits of the HP port (S_AXI_HP0, 32-bit on the Zynq-7000): the
# shell's DAW.
dict set ::fabric::board dma_addr_bits 32
