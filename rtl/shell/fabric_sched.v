// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_sched: one slot's scheduler. Three registered choices a cycle,
// each checked again by whoever acts on it (a choice is a cycle old):
//   - a lane: the oldest accepted context still waiting gets one while the
//     slot decodes fewer than LANES (the order of acceptance is an age
//     matrix, so finding the oldest is one AND per context, not a chain of
//     compares); at most one a second cycle, so the count it reads is
//     never behind a grant. A lane has a number below LANES, the lowest
//     not held by a decoding context nor awaiting an answer from the
//     slot: the engine keeps a context's state (a transformer's keys and
//     values) by it, so no two contexts share one, and an engine needs
//     room for LANES contexts, not CPS;
//   - a step: the next decoding context, in turn after the last one
//     stepped, whose draw is ready, which is not cancelled and has no
//     step out with the slot;
//   - an end: a context the host cancelled, or any while the slot is being
//     reprogrammed (kill), other than those the step port holds.

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
    input  wire [CPS-1:0] held,         // contexts the step port holds
    input  wire [CPS-1:0] lanes_out,    // lanes with a step out with the slot
    input  wire           taken,        // the step port took a step
    input  wire [LW-1:0]  taken_idx,

    output reg            gr_valid,
    output wire [LW-1:0]  gr_idx,
    output reg            pk_valid,
    output reg  [LW-1:0]  pk_idx,
    output reg  [LW-1:0]  pk_lane,      // its lane's number
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

    reg [LW-1:0]  lane_of [0:CPS-1];    // a decoding context's lane
    localparam [CPS-1:0] LANE_MASK = ~({CPS{1'b1}} << LANES);

    wire [CPS-1:0] waiting = busy & ~run;
    assign can_step = busy & run & draw_ok & ~hit & ~held;

    // The lanes taken: a decoding context's, or one the slot still owes an
    // answer on (a step out for a context ended meanwhile).
    reg [CPS-1:0] lanes_taken;
    integer m;
    always @(*) begin
        lanes_taken = lanes_out;
        for (m = 0; m < CPS; m = m + 1)
            if (busy[m] && run[m])
                lanes_taken[lane_of[m]] = 1'b1;
    end
    wire [LW:0] free_lane = first(~lanes_taken & LANE_MASK);

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
        gr_valid = grant_pick[LW] && free_lane[LW] && !granted && !kill && !flush &&
                   lanes_used < LANES[LW:0];

    wire [LW:0] step_pick = after(can_step, rr);
    wire [CPS-1:0] ends = (kill ? busy : hit) & ~held;
    wire [LW:0] end_pick = first(ends);

    always @(posedge clk) begin
        oldest_q <= oldest;
        lanes_used <= ones(busy & run);
        granted <= gr_valid;
        pk_valid <= step_pick[LW] && !kill;
        pk_idx <= step_pick[LW-1:0];
        pk_lane <= lane_of[step_pick[LW-1:0]];
        if (gr_valid)
            lane_of[gr_idx] <= free_lane[LW-1:0];
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
