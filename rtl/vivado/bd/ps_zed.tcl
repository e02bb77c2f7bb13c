# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The ZedBoard's processing-system side as a block design, fabric_ps: the
# Zynq-7000 PS (processing_system7), the fabric's clock and reset, one
# SmartConnect from M_AXI_GP0 to the three register windows, one from the
# shell's DMA master to S_AXI_HP0. rtl/top/fabric_top.v instantiates module
# fabric_ps (the block design's own module); an interface port X appears as
# X_<signal> in lower case (M_AXI_SHELL_awaddr, S_AXI_HP_arlen, ...). The
# ports are the KV260's (bd/ps_kv260.tcl) but for the clock, the addresses,
# the interrupt and the HP port's address width.
#
# External ports, matching device-tree/zynq-7000-shell.dtsi (included by
# fabricd-shell-zed.dtso):
#   pl_clk       out  FCLK_CLK0, 100 MHz
#   pl_resetn    out  active low, synchronous to pl_clk (proc_sys_reset's
#                     peripheral_aresetn, from FCLK_RESET0_N)
#   M_AXI_SHELL  AXI4-Lite master, 32-bit data: the shell's registers,
#                0x43C0_0000, 4 KiB (fabric-shell@43c00000)
#   M_AXI_DCP0   AXI4-Lite master: slot 0's decoupler, 0x43C1_0000, 4 KiB
#   M_AXI_DCP1   AXI4-Lite master: slot 1's decoupler, 0x43C2_0000, 4 KiB
#   S_AXI_HP     AXI4 slave, 32-bit data, 32-bit address, no ID, lock,
#                cache, prot, QoS or region: the shell's DMA into DDR
#                through S_AXI_HP0 (64 bits at the PS, the FSBL's default;
#                the SmartConnect converts)
#   S_AXI_E0     AXI4 slave, read and write, 64-bit data, 32-bit address:
#                slot 0's engine reading its table (contract 2.0) and, a
#                transformer, writing its lanes' keys and values, through
#                S_AXI_HP1 (INCR reads of 8-byte beats, 16 at most; single-
#                beat writes)
#   S_AXI_E1     the same for slot 1's, through S_AXI_HP2 (the HP ports are
#                64-bit AXI3: a SmartConnect each converts the protocol)
#   irq          in   level, high: IRQ_F2P[0], GIC SPI 29 (interrupts =
#                     <0 29 4>; UG585, table 7-4: interrupt id 61)
#
# DDR and FIXED_IO are left inside: the PS's pins were configured by the
# FSBL before Linux loads this bitstream, and the board top stays the same
# for both boards. No board preset is applied, for the same reason.

namespace eval fabric::bd {}

proc fabric::bd::create {dir} {
    create_bd_design -dir $dir fabric_ps

    set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:processing_system7:* ps]
    set_property -dict [list \
        CONFIG.PCW_EN_CLK0_PORT {1} \
        CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ {100} \
        CONFIG.PCW_EN_RST0_PORT {1} \
        CONFIG.PCW_USE_M_AXI_GP0 {1} \
        CONFIG.PCW_USE_S_AXI_HP0 {1} \
        CONFIG.PCW_S_AXI_HP0_DATA_WIDTH {64} \
        CONFIG.PCW_USE_S_AXI_HP1 {1} \
        CONFIG.PCW_S_AXI_HP1_DATA_WIDTH {64} \
        CONFIG.PCW_USE_S_AXI_HP2 {1} \
        CONFIG.PCW_S_AXI_HP2_DATA_WIDTH {64} \
        CONFIG.PCW_USE_FABRIC_INTERRUPT {1} \
        CONFIG.PCW_IRQ_F2P_INTR {1} \
    ] $ps

    set rst [create_bd_cell -type ip -vlnv xilinx.com:ip:proc_sys_reset:* rst]
    set ctl [create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect:* ctl]
    set_property -dict [list CONFIG.NUM_SI {1} CONFIG.NUM_MI {3}] $ctl
    set dma [create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect:* dma]
    set_property -dict [list CONFIG.NUM_SI {1} CONFIG.NUM_MI {1}] $dma
    foreach e {e0 e1} {
        set_property -dict [list CONFIG.NUM_SI {1} CONFIG.NUM_MI {1}] \
            [create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect:* $e]
    }

    # The clock and reset, inside and out.
    set clk [get_bd_pins ps/FCLK_CLK0]
    connect_bd_net $clk [get_bd_pins ps/M_AXI_GP0_ACLK] [get_bd_pins ps/S_AXI_HP0_ACLK] \
        [get_bd_pins ps/S_AXI_HP1_ACLK] [get_bd_pins ps/S_AXI_HP2_ACLK] \
        [get_bd_pins rst/slowest_sync_clk] [get_bd_pins ctl/aclk] [get_bd_pins dma/aclk] \
        [get_bd_pins e0/aclk] [get_bd_pins e1/aclk]
    connect_bd_net [get_bd_pins ps/FCLK_RESET0_N] [get_bd_pins rst/ext_reset_in]
    connect_bd_net [get_bd_pins rst/interconnect_aresetn] [get_bd_pins ctl/aresetn] \
        [get_bd_pins dma/aresetn] [get_bd_pins e0/aresetn] [get_bd_pins e1/aresetn]
    set pl_clk [create_bd_port -dir O -type clk pl_clk]
    set_property -dict [list \
        CONFIG.ASSOCIATED_BUSIF {M_AXI_SHELL:M_AXI_DCP0:M_AXI_DCP1:S_AXI_HP:S_AXI_E0:S_AXI_E1} \
        CONFIG.ASSOCIATED_RESET {pl_resetn} \
    ] $pl_clk
    connect_bd_net $clk $pl_clk
    set pl_resetn [create_bd_port -dir O -type rst pl_resetn]
    connect_bd_net [get_bd_pins rst/peripheral_aresetn] $pl_resetn

    # The register windows, on M_AXI_GP0 (0x4000_0000-0x7FFF_FFFF).
    connect_bd_intf_net [get_bd_intf_pins ps/M_AXI_GP0] [get_bd_intf_pins ctl/S00_AXI]
    foreach {mi port offset} {
        M00_AXI M_AXI_SHELL 0x43C00000
        M01_AXI M_AXI_DCP0 0x43C10000
        M02_AXI M_AXI_DCP1 0x43C20000
    } {
        set p [create_bd_intf_port -mode Master -vlnv xilinx.com:interface:aximm_rtl:1.0 $port]
        set_property -dict [list CONFIG.PROTOCOL {AXI4LITE} CONFIG.DATA_WIDTH {32} \
            CONFIG.ADDR_WIDTH {32}] $p
        connect_bd_intf_net [get_bd_intf_pins ctl/$mi] $p
        assign_bd_address -offset $offset -range 4K \
            -target_address_space [get_bd_addr_spaces ps/Data] [get_bd_addr_segs $port/Reg]
    }

    # The shell's DMA master into DDR.
    set hp [create_bd_intf_port -mode Slave -vlnv xilinx.com:interface:aximm_rtl:1.0 S_AXI_HP]
    set_property -dict [list CONFIG.PROTOCOL {AXI4} CONFIG.DATA_WIDTH {32} \
        CONFIG.ADDR_WIDTH {32} CONFIG.ID_WIDTH {0} CONFIG.HAS_LOCK {0} \
        CONFIG.HAS_CACHE {0} CONFIG.HAS_PROT {0} CONFIG.HAS_QOS {0} \
        CONFIG.HAS_REGION {0} CONFIG.HAS_BURST {1}] $hp
    connect_bd_intf_net $hp [get_bd_intf_pins dma/S00_AXI]
    connect_bd_intf_net [get_bd_intf_pins dma/M00_AXI] [get_bd_intf_pins ps/S_AXI_HP0]
    assign_bd_address -target_address_space [get_bd_addr_spaces S_AXI_HP] \
        [get_bd_addr_segs ps/S_AXI_HP0/HP0_DDR_LOWOCM]

    # Each slot's engine reads its model's table from DDR, and writes what a
    # transformer keeps there, through a port of its own (contract 2.0):
    # slot 0's through S_AXI_HP1, slot 1's through S_AXI_HP2, 64 bits both
    # sides, each SmartConnect converting AXI4 to the HP port's AXI3 (the
    # engines' bursts are of 16 beats at most, AXI3's limit, and their
    # writes single beats).
    foreach {port sc hp seg} {
        S_AXI_E0 e0 S_AXI_HP1 ps/S_AXI_HP1/HP1_DDR_LOWOCM
        S_AXI_E1 e1 S_AXI_HP2 ps/S_AXI_HP2/HP2_DDR_LOWOCM
    } {
        set p [create_bd_intf_port -mode Slave -vlnv xilinx.com:interface:aximm_rtl:1.0 $port]
        set_property -dict [list CONFIG.PROTOCOL {AXI4} CONFIG.READ_WRITE_MODE {READ_WRITE} \
            CONFIG.DATA_WIDTH {64} CONFIG.ADDR_WIDTH {32} CONFIG.ID_WIDTH {0} \
            CONFIG.HAS_LOCK {0} CONFIG.HAS_CACHE {0} CONFIG.HAS_PROT {0} CONFIG.HAS_QOS {0} \
            CONFIG.HAS_REGION {0} CONFIG.HAS_BURST {1}] $p
        connect_bd_intf_net $p [get_bd_intf_pins $sc/S00_AXI]
        connect_bd_intf_net [get_bd_intf_pins $sc/M00_AXI] [get_bd_intf_pins ps/$hp]
        assign_bd_address -target_address_space [get_bd_addr_spaces $port] [get_bd_addr_segs $seg]
    }

    set irq [create_bd_port -dir I -type intr irq]
    set_property CONFIG.SENSITIVITY {LEVEL_HIGH} $irq
    connect_bd_net $irq [get_bd_pins ps/IRQ_F2P]

    validate_bd_design
    save_bd_design
}
