// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_sched: one slot's scheduler. Three registered choices a cycle,
// each checked again by whoever acts on it (a choice is a cycle old):
//   - a lane: the oldest accepted context still waiting gets one while the
//     slot decodes fewer than LANES (the order of acceptance is an age
//     matrix, so finding the oldest is one AND per context, not a chain of
//     compares); at most one a second cycle, so the count it reads is
//     never behind a grant;
//   - a step: the next decoding context, in turn after the last one
//     stepped, whose draw is ready and which is not cancelled;
//   - an end: a context the host cancelled, or any while the slot is being
//     reprogrammed (kill), other than the one the step port holds.

`default_nettype none

module fabric_sched #(
    parameter integer CPS = 8,
    parameter integer LANES = 4,
    // Derived from the parameters above: leave them be.
    parameter integer LW = (CPS > 1) ? $clog2(CPS) : 1
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           flush,

    input  wire [CPS-1:0] busy,
    input  wire [CPS-1:0] run,
    input  wire [CPS-1:0] draw_ok,
    input  wire [CPS-1:0] hit,
    input  wire           kill,
    input  wire           al_valid,     // a context accepted: the youngest now
    input  wire [LW-1:0]  al_idx,
    input  wire           held,         // the step port holds a context
    input  wire [LW-1:0]  held_idx,
    input  wire           taken,        // the step port took a step
    input  wire [LW-1:0]  taken_idx,

    output reg            gr_valid,
    output wire [LW-1:0]  gr_idx,
    output reg            pk_valid,
    output reg  [LW-1:0]  pk_idx,
    output reg            en_valid,
    output reg  [LW-1:0]  en_idx,
    output reg            en_cancel,    // a cancel (else the slot's kill)
    output wire [CPS-1:0] can_step      // what a step may take now
);
    // older[i][j]: context i was accepted before context j.
    reg [CPS-1:0] older [0:CPS-1];
    reg [CPS-1:0] oldest_q;
    reg [LW:0]    lanes_used;           // decoding contexts, a cycle old
    reg [LW-1:0]  rr;                   // after the last step taken
    reg           granted;              // a lane was given last cycle

    wire [CPS-1:0] waiting = busy & ~run;
    wire [CPS-1:0] held_mask = held ? ({{(CPS - 1){1'b0}}, 1'b1} << held_idx) : {CPS{1'b0}};
    assign can_step = busy & run & draw_ok & ~hit & ~held_mask;

    function [LW:0] ones(input [CPS-1:0] v);
        integer k;
        begin
            ones = {(LW + 1){1'b0}};
            for (k = 0; k < CPS; k = k + 1)
                ones = ones + {{LW{1'b0}}, v[k]};
        end
    endfunction

    function [LW:0] first(input [CPS-1:0] v);
        integer k;
        begin
            first = {1'b0, {LW{1'b0}}};
            for (k = CPS - 1; k >= 0; k = k - 1)
                if (v[k])
                    first = {1'b1, k[LW-1:0]};
        end
    endfunction

    // The first set bit of v at or after `from`, in turn.
    function [LW:0] after(input [CPS-1:0] v, input [LW-1:0] from);
        integer k;
        reg [LW:0] c;
        begin
            after = {1'b0, {LW{1'b0}}};
            for (k = CPS - 1; k >= 0; k = k - 1) begin
                c = {1'b0, from} + k[LW:0];
                if (c >= CPS[LW:0])
                    c = c - CPS[LW:0];
                if (v[c[LW-1:0]])
                    after = {1'b1, c[LW-1:0]};
            end
        end
    endfunction

    // The oldest waiting context: waiting, and no waiting one older.
    reg [CPS-1:0] oldest;
    integer i, j;
    always @(*) begin
        for (i = 0; i < CPS; i = i + 1) begin
            oldest[i] = waiting[i];
            for (j = 0; j < CPS; j = j + 1)
                if (j != i && waiting[j] && older[j][i])
                    oldest[i] = 1'b0;
        end
    end

    wire [LW:0] grant_pick = first(oldest_q & waiting);
    assign gr_idx = grant_pick[LW-1:0];
    always @(*)
        gr_valid = grant_pick[LW] && !granted && !kill && !flush &&
                   lanes_used < LANES[LW:0];

    wire [LW:0] step_pick = after(can_step, rr);
    wire [CPS-1:0] ends = (kill ? busy : hit) & ~held_mask;
    wire [LW:0] end_pick = first(ends);

    always @(posedge clk) begin
        oldest_q <= oldest;
        lanes_used <= ones(busy & run);
        granted <= gr_valid;
        pk_valid <= step_pick[LW] && !kill;
        pk_idx <= step_pick[LW-1:0];
        en_valid <= end_pick[LW];
        en_idx <= end_pick[LW-1:0];
        en_cancel <= !kill;
        if (taken)
            rr <= taken_idx + 1'b1;
        if (al_valid)
            for (i = 0; i < CPS; i = i + 1) begin
                older[al_idx][i] <= 1'b0;
                if (i[LW-1:0] != al_idx)
                    older[i][al_idx] <= 1'b1;
            end
        if (rst || flush) begin
            oldest_q <= {CPS{1'b0}};
            granted <= 1'b0;
            pk_valid <= 1'b0;
            en_valid <= 1'b0;
            rr <= {LW{1'b0}};
        end
    end
endmodule

`default_nettype wire
