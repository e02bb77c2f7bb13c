# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The ZedBoard's (XC7Z020) reconfigurable partitions: one Pblock per slot
# in the right-hand clock-region column, slot0 the top row of clock regions
# (CLB rows 100-149), slot1 the bottom row (0-49), each with the three
# right-hand block-RAM columns and both right-hand DSP columns of its rows.
# The static shell keeps the middle row and the left-hand column beside the
# PS. A slot's cell is fabric_top's slot0.rm or slot1.rm (the instance rm
# of its generate block).
#
# Each Pblock holds about 12,800 LUTs, 40 DSPs and 30 BRAM36: the trigram
# engine (2,210 LUTs, 8 DSPs), not the transformer (19,919 LUTs, 131 DSPs,
# 96 BRAM36; results/synth-lm-2026-12-06.md), which is why the ZedBoard is
# built with the trigram engine alone (scripts/build-bitstreams). The
# XC7Z020 holds the shell, one transformer and one trigram engine, by that
# estimate: a Pblock for a transformer would take most of the die's block
# RAM and DSP columns, and the other slot would hold the trigram engine
# only.
#
# Site coordinates follow Xilinx's floorplans for the same die (the
# XC7Z020 of the PYNQ-Z2) in PYNQ_Composable_Pipeline
# (boards/Pynq-Z2/cv_dfx_4_pr.xdc: RAMB36_X4 and DSP48_X3 beside
# SLICE_X84..X93, 50 CLB rows a clock region). They have not been placed
# by Vivado for this design: report_utilization -pblocks after the first
# configuration says whether the slot fits.
#
# 7 series (UG909, "Apply Reset After Reconfiguration"): RESET_AFTER_RECONFIG
# needs the Pblock's height aligned to clock regions, as both are here;
# SNAPPING_MODE ON keeps the edges off back-to-back interconnect columns
# ("Automatic Adjustments for Reconfigurable Partition Pblocks").

create_pblock pblock_slot0
add_cells_to_pblock [get_pblocks pblock_slot0] [get_cells slot0.rm]
resize_pblock [get_pblocks pblock_slot0] -add {SLICE_X50Y100:SLICE_X113Y149}
resize_pblock [get_pblocks pblock_slot0] -add {DSP48_X3Y40:DSP48_X4Y59}
resize_pblock [get_pblocks pblock_slot0] -add {RAMB18_X3Y40:RAMB18_X5Y59}
resize_pblock [get_pblocks pblock_slot0] -add {RAMB36_X3Y20:RAMB36_X5Y29}
set_property RESET_AFTER_RECONFIG true [get_pblocks pblock_slot0]
set_property SNAPPING_MODE ON [get_pblocks pblock_slot0]
set_property IS_SOFT FALSE [get_pblocks pblock_slot0]

create_pblock pblock_slot1
add_cells_to_pblock [get_pblocks pblock_slot1] [get_cells slot1.rm]
resize_pblock [get_pblocks pblock_slot1] -add {SLICE_X50Y0:SLICE_X113Y49}
resize_pblock [get_pblocks pblock_slot1] -add {DSP48_X3Y0:DSP48_X4Y19}
resize_pblock [get_pblocks pblock_slot1] -add {RAMB18_X3Y0:RAMB18_X5Y19}
resize_pblock [get_pblocks pblock_slot1] -add {RAMB36_X3Y0:RAMB36_X5Y9}
set_property RESET_AFTER_RECONFIG true [get_pblocks pblock_slot1]
set_property SNAPPING_MODE ON [get_pblocks pblock_slot1]
set_property IS_SOFT FALSE [get_pblocks pblock_slot1]
