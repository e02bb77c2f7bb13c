// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_slot_state: what one PR slot holds, as SLOT_STATE, SLOT_LOADS and
// SLOT_HASH report it (docs/fabric-contract.md section 7).
//
// Decoupled means a load is under way: the slot reads loading, and every
// request its contexts hold ends as a fault (kill), the step outstanding,
// if any, lost (the slot comes up torn). Coupled again, the slot is held in
// reset a few cycles and then says what it now holds: a greybox (a
// partition with no module) ties every output to 0 (UG909), so `present`
// low reads empty at once; a module reads its table and raises
// `table_done`, and the slot is ready with the table's identity, or in
// error. A module that never finishes reading its table within SETTLE_MAX
// cycles is a bad image: the wait is bounded.
//
// An answer with no step outstanding is what a slot reprogrammed while
// coupled drives: the slot is torn until it is loaded again.

`default_nettype none

module fabric_slot_state #(
    parameter integer CPS = 8,
    parameter integer RESET_CYCLES = 4,
    parameter integer SETTLE_MAX = 4096
) (
    input  wire           clk,
    input  wire           rst,

    input  wire           decoupled,
    input  wire           present,
    input  wire           table_done,
    input  wire           table_ok,
    input  wire [255:0]   identity,
    input  wire           stray,        // an answer nobody asked for
    input  wire           hung,         // a step never answered
    input  wire           outstanding,  // a step is out with the slot
    input  wire [CPS-1:0] busy,
    input  wire           quiesce,

    output reg  [3:0]     state,
    output reg  [7:0]     err,
    output reg  [31:0]    loads,
    output reg  [255:0]   hash,
    output reg            kill,
    output reg            reload,       // the slot's reset after a load
    output wire           usable,
    output reg            ev_bump
);
    localparam [3:0] SL_EMPTY = 4'd0, SL_LOADING = 4'd1, SL_READY = 4'd2, SL_ERROR = 4'd3;
    localparam [7:0] SE_BAD_IMAGE = 8'd2, SE_TORN = 8'd4, SE_HUNG = 8'd5;

    reg        dec_seen, torn, settling;
    reg [31:0] settle;

    // A load begins, or the slot answered what nobody asked.
    wire killing = (decoupled && !dec_seen) || (stray && !torn && !decoupled);

    assign usable = state == SL_READY && !quiesce && !decoupled && !kill && !settling;

    always @(posedge clk) begin
        ev_bump <= 1'b0;
        dec_seen <= decoupled;
        if (rst) begin
            state <= SL_EMPTY;
            err <= 8'd0;
            loads <= 32'd0;
            hash <= 256'd0;
            kill <= 1'b0;
            torn <= 1'b0;
            reload <= 1'b0;
            // Power-on: the slot reads its table, as after a load.
            settling <= 1'b1;
            settle <= 32'd0;
            dec_seen <= 1'b0;
        end else begin
            if (decoupled && !dec_seen) begin
                   // A load begins: a step outstanding now is lost.
                state <= SL_LOADING;
                err <= 8'd0;
                settling <= 1'b0;
                reload <= 1'b0;
                torn <= outstanding;
                ev_bump <= 1'b1;
            end else if (!decoupled && dec_seen) begin
                reload <= 1'b1;
                settling <= 1'b1;
                settle <= 32'd0;
            end else if (stray && !torn && !decoupled) begin
                torn <= 1'b1;
                state <= SL_ERROR;
                err <= SE_TORN;
                ev_bump <= 1'b1;
            end else if (hung) begin
                state <= SL_ERROR;
                err <= SE_HUNG;
                ev_bump <= 1'b1;
            end else if (settling && !decoupled) begin
                settle <= settle + 32'd1;
                if (settle == RESET_CYCLES - 1)
                    reload <= 1'b0;
                if (settle >= RESET_CYCLES) begin
                    if (!present || table_done || settle == SETTLE_MAX) begin
                        settling <= 1'b0;
                        ev_bump <= 1'b1;
                        if (!present) begin
                            // A greybox: no module.
                            state <= SL_EMPTY;
                            err <= 8'd0;
                            hash <= 256'd0;
                        end else if (torn) begin
                            state <= SL_ERROR;
                            err <= SE_TORN;
                        end else if (table_done && table_ok) begin
                            state <= SL_READY;
                            err <= 8'd0;
                            hash <= identity;
                            loads <= loads + 32'd1;
                        end else begin
                            // A module without a table, or one that never
                            // finished reading it.
                            state <= SL_ERROR;
                            err <= SE_BAD_IMAGE;
                            hash <= 256'd0;
                        end
                    end
                end
            end
            // Its contexts end while it is killed, until none is left.
            if (killing)
                kill <= 1'b1;
            else if (busy == {CPS{1'b0}})
                kill <= 1'b0;
        end
    end
endmodule

`default_nettype wire
