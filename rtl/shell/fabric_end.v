// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_end: ends a slot's requests that do not end by decoding: one the
// host cancelled (CTX_CANCEL, section 5: DONE, cancelled, with the output
// so far) and, while the slot is being reprogrammed, every one its
// contexts hold (DONE, fault: their model is going, section 7). It acts on
// fabric_sched's choice once it is still true, and on a context the step
// port does not hold: a cancel of a request waiting for a lane ends it at
// once; one with a step out with the slot ends once its answer is in (a
// transformer's first step feeds the whole prompt before it answers).

`default_nettype none

module fabric_end #(
    parameter integer SLOT = 0,
    parameter integer CPS = 8,
    // Derived from the parameters above: leave them be.
    parameter integer LW = (CPS > 1) ? $clog2(CPS) : 1,
    parameter integer EW = 168
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           flush,
    input  wire [31:0]    us_now,

    input  wire           en_valid,
    input  wire [LW-1:0]  en_idx,
    input  wire           en_cancel,
    input  wire [CPS-1:0] busy,
    input  wire [CPS-1:0] hit,
    input  wire           kill,
    input  wire [CPS-1:0] held,         // contexts the step port holds

    output wire [LW-1:0]  rd_idx,
    input  wire [31:0]    rd_tag,
    input  wire [31:0]    rd_crc,
    input  wire [15:0]    rd_produced,
    input  wire [31:0]    rd_us,

    output reg            fr_valid,
    output reg  [LW-1:0]  fr_idx,

    output reg            cq_valid,
    input  wire           cq_ready,
    output wire [EW-1:0]  cq_entry,

    output reg            ev_err,
    output reg            ev_cancelled
);
    localparam [7:0] ST_CANCELLED = 8'd1, ST_FAULT = 8'd4;
    localparam [7:0] K_DONE = 8'd2, FIN_NONE = 8'd0;
    localparam integer CTX_FIRST = SLOT * CPS;
    localparam [15:0] CTX0 = CTX_FIRST[15:0];

    reg [LW-1:0] idx;
    reg          cancel;

    assign rd_idx = cq_valid ? idx : en_idx;
    assign cq_entry = {rd_tag, CTX0 + {{(16 - LW){1'b0}}, idx}, K_DONE,
                       cancel ? ST_CANCELLED : ST_FAULT, {16'd0, rd_produced}, ~rd_crc,
                       us_now - rd_us, FIN_NONE};

    // The choice still holds: the context is busy, not the step port's, and
    // cancelled (or the slot is being reprogrammed).
    wire still = en_valid && busy[en_idx] && !held[en_idx] &&
                 (en_cancel ? hit[en_idx] : kill);

    always @(posedge clk) begin
        fr_valid <= 1'b0;
        ev_err <= 1'b0;
        ev_cancelled <= 1'b0;
        if (rst || flush) begin
            cq_valid <= 1'b0;
        end else if (!cq_valid) begin
            if (still && !fr_valid) begin
                idx <= en_idx;
                cancel <= en_cancel;
                cq_valid <= 1'b1;
            end
        end else if (cq_ready) begin
            cq_valid <= 1'b0;
            fr_valid <= 1'b1;
            fr_idx <= idx;
            ev_cancelled <= cancel;
            ev_err <= !cancel;
        end
    end
endmodule

`default_nettype wire
