# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The KV260's (K26) reconfigurable partitions: one Pblock per slot, each two
# clock-region rows of the right-hand columns (slot0 the upper half, slot1
# the lower), with half the UltraRAM and two of the three block-RAM columns
# each; the static shell and the PS's interconnect keep the left-hand
# columns and RAMB36_X0. A slot's cell is fabric_top's slot0.rm or slot1.rm
# (the instance rm of its generate block).
#
# Each Pblock must hold every engine built for its slot: on paper about
# 32,600 LUTs, 288 DSPs, 48 BRAM36 and 32 URAM288 each, against the
# transformer's 29,717 LUTs, 131 DSPs, 19.5 BRAM36 and 10 URAM288 (yosys,
# results/synth-lm-2026-12-06.md): 91% of its LUTs, more than a Pblock is
# usually filled to; the trigram engine's 2,252 LUTs are no concern.
#
# Site coordinates follow Xilinx's floorplans for the same device in
# PYNQ_Composable_Pipeline (boards/KV260/cv_dfx_4_pr.xdc: SLICE_X40..X60,
# RAMB36_X1..X2, URAM288_X0, DSP48E2_X11..X12 in one clock-region row, 60
# CLB rows a region). They have not been placed by Vivado for this design:
# report_utilization -pblocks after the first configuration says whether
# the slot fits, and the DRCs whether the shape is legal.
#
# UltraScale+ (UG909, "Automatic Adjustments for PU on Pblocks"): a partial
# reconfiguration always ends with GSR and SNAPPING_MODE is on by default;
# both are set here as Xilinx's own KV260 floorplans set them, so the intent
# reads the same as the ZedBoard's.

create_pblock pblock_slot0
add_cells_to_pblock [get_pblocks pblock_slot0] [get_cells slot0.rm]
resize_pblock [get_pblocks pblock_slot0] -add {SLICE_X27Y120:SLICE_X60Y239}
resize_pblock [get_pblocks pblock_slot0] -add {DSP48E2_X7Y48:DSP48E2_X12Y95}
resize_pblock [get_pblocks pblock_slot0] -add {RAMB18_X1Y48:RAMB18_X2Y95}
resize_pblock [get_pblocks pblock_slot0] -add {RAMB36_X1Y24:RAMB36_X2Y47}
resize_pblock [get_pblocks pblock_slot0] -add {URAM288_X0Y32:URAM288_X0Y63}
set_property RESET_AFTER_RECONFIG true [get_pblocks pblock_slot0]
set_property SNAPPING_MODE ON [get_pblocks pblock_slot0]
set_property IS_SOFT FALSE [get_pblocks pblock_slot0]

create_pblock pblock_slot1
add_cells_to_pblock [get_pblocks pblock_slot1] [get_cells slot1.rm]
resize_pblock [get_pblocks pblock_slot1] -add {SLICE_X27Y0:SLICE_X60Y119}
resize_pblock [get_pblocks pblock_slot1] -add {DSP48E2_X7Y0:DSP48E2_X12Y47}
resize_pblock [get_pblocks pblock_slot1] -add {RAMB18_X1Y0:RAMB18_X2Y47}
resize_pblock [get_pblocks pblock_slot1] -add {RAMB36_X1Y0:RAMB36_X2Y23}
resize_pblock [get_pblocks pblock_slot1] -add {URAM288_X0Y0:URAM288_X0Y31}
set_property RESET_AFTER_RECONFIG true [get_pblocks pblock_slot1]
set_property SNAPPING_MODE ON [get_pblocks pblock_slot1]
set_property IS_SOFT FALSE [get_pblocks pblock_slot1]
