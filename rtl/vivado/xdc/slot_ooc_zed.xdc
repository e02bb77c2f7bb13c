# SPDX-License-Identifier: MIT OR Apache-2.0
#
# A slot synthesized out of context (read with read_xdc -mode
# out_of_context): its clock is the fabric's, 100 MHz on this board, so that
# synthesis times the engine as implementation will.

create_clock -period 10.000 -name clk [get_ports clk]
