// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_slot_state: what one PR slot holds, as SLOT_STATE, SLOT_ENGINE,
// SLOT_LOADS, SLOT_TABLE_CRC, SLOT_COMMITTED and SLOT_IDENTITY report it,
// and the table commits it acts on (docs/fabric-contract.md section 7).
//
// Decoupled means a load is under way: the slot reads loading, and every
// request its contexts hold ends as a fault (kill); a step or a table read
// under way is lost (the slot comes up torn). Coupled again, the slot is
// held in reset a few cycles (and until its port owes it no beat from
// before, fabric_decoupler) and then says what it now holds: a greybox (a
// partition with no module) ties every output to 0 (UG909), so its engine
// reads 0 and the slot empty; an engine's slot holds no model until a
// table is committed to it.
//
// A commit (TABLE_COMMIT written with a value other than SLOT_COMMITTED) is
// acted on only by a slot quiesced with nothing outstanding that holds an
// engine: its held requests end (their model is going), the engine reads
// the table in, and the slot is ready with the table's CRC and identity,
// or in error; SLOT_LOADS counts it either way. Any other slot refuses it
// (FAULT_CODE 7) and keeps what it held. Either way SLOT_COMMITTED takes
// the commit's value once done. An engine that never finishes reading a
// table within COMMIT_WATCHDOG cycles is hung.
//
// An answer with no step outstanding is what a slot reprogrammed while
// coupled drives: the slot is torn until it is loaded again.

`default_nettype none

module fabric_slot_state #(
    parameter integer CPS = 8,
    parameter integer DAW = 40,
    parameter integer RESET_CYCLES = 4,
    parameter integer COMMIT_WATCHDOG = 1 << 27
) (
    input  wire           clk,
    input  wire           rst,

    input  wire           decoupled,
    input  wire           draining,     // its port still drops bursts owed
    input  wire [31:0]    engine,       // what the module reports; 0: none
    input  wire           stray,        // an answer nobody asked for
    input  wire           hung,         // a step never answered
    input  wire           table_fault,  // a step's table read failed
    input  wire           outstanding,  // a step is out with the slot
    input  wire           reading,      // the engine has a read under way
    input  wire           idle,         // nothing out with the slot
    input  wire [CPS-1:0] busy,
    input  wire           quiesce,

    // The commit the host asks for, and the engine's side of it.
    input  wire [31:0]    commit,       // TABLE_COMMIT
    input  wire [DAW-1:0] commit_base,  // TABLE_BASE
    input  wire [31:0]    commit_words, // TABLE_WORDS
    output reg            tbl_start,
    output reg  [DAW-1:0] tbl_base,
    output reg  [31:0]    tbl_region,
    input  wire           tbl_done,
    input  wire [1:0]     tbl_result,
    input  wire [31:0]    tbl_crc,
    input  wire [255:0]   tbl_identity,

    output reg  [3:0]     state,
    output reg  [7:0]     err,
    output reg  [31:0]    engine_id,
    output reg  [31:0]    loads,
    output reg  [31:0]    table_crc,
    output reg  [31:0]    committed,
    output reg  [255:0]   identity,
    output reg            kill,
    output reg            reload,       // the slot's reset after a load
    output wire           usable,
    output reg            ev_bump,
    output reg            ev_err,
    output reg            ev_fault,
    output reg  [7:0]     ev_code
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_commit;
    initial break_commit = $test$plusargs("fabric_break_commit") != 0;
`endif

    localparam [3:0] SL_EMPTY = 4'd0, SL_LOADING = 4'd1, SL_READY = 4'd2, SL_ERROR = 4'd3,
                     SL_NO_MODEL = 4'd4;
    localparam [7:0] SE_BAD_TABLE = 8'd2, SE_TORN = 8'd4, SE_HUNG = 8'd5, SE_TABLE_READ = 8'd6;
    localparam [7:0] F_COMMIT_REFUSED = 8'd7, F_TABLE_READ = 8'd8;
    localparam [1:0] R_OK = 2'd0, R_BAD = 2'd1;

    reg        dec_seen, torn, settling, committing;
    reg [7:0]  settle;
    reg [31:0] commit_val;
    reg [31:0] watch;

    // A load begins, or the slot answered what nobody asked.
    wire killing = (decoupled && !dec_seen) || (stray && !torn && !decoupled);
    wire asked = commit != committed && !committing && !settling && !decoupled && !dec_seen;
`ifdef FABRIC_MUTANTS
    // Broken: a serving slot takes it.
    wire acts = engine_id != 32'd0 && state != SL_LOADING && state != SL_EMPTY &&
                (break_commit || (quiesce && idle));
`else
    wire acts = engine_id != 32'd0 && state != SL_LOADING && state != SL_EMPTY &&
                quiesce && idle;
`endif

    // A commit begins this cycle (nothing above it in the order below).
    wire begins = asked && acts && !(stray && !torn) && !hung && !table_fault;

    assign usable = state == SL_READY && !quiesce && !decoupled && !kill && !settling &&
                    !committing;

    always @(posedge clk) begin
        ev_bump <= 1'b0;
        ev_err <= 1'b0;
        ev_fault <= 1'b0;
        tbl_start <= 1'b0;
        dec_seen <= decoupled;
        if (rst) begin
            state <= SL_EMPTY;
            err <= 8'd0;
            engine_id <= 32'd0;
            loads <= 32'd0;
            table_crc <= 32'd0;
            committed <= 32'd0;
            identity <= 256'd0;
            kill <= 1'b0;
            torn <= 1'b0;
            committing <= 1'b0;
            ev_code <= 8'd0;
            // Power-on: the slot says what it holds, as after a load.
            reload <= 1'b1;
            settling <= 1'b1;
            settle <= 8'd0;
            dec_seen <= 1'b0;
        end else begin
            if (decoupled && !dec_seen) begin
                // A load begins: a step or a table read under way is lost;
                // a commit under way has been acted on (the slot comes up
                // torn), and is not taken up again after the load.
                state <= SL_LOADING;
                err <= 8'd0;
                settling <= 1'b0;
                reload <= 1'b0;
                committing <= 1'b0;
                if (committing)
                    committed <= commit_val;
                torn <= outstanding || reading;
                ev_bump <= 1'b1;
            end else if (!decoupled && dec_seen) begin
                reload <= 1'b1;
                settling <= 1'b1;
                settle <= 8'd0;
            end else if (stray && !torn && !decoupled) begin
                torn <= 1'b1;
                state <= SL_ERROR;
                err <= SE_TORN;
                ev_bump <= 1'b1;
            end else if (hung) begin
                state <= SL_ERROR;
                err <= SE_HUNG;
                ev_bump <= 1'b1;
            end else if (table_fault && !committing) begin
                // The step's request ends as a fault (8) at the step port.
                state <= SL_ERROR;
                err <= SE_TABLE_READ;
                ev_bump <= 1'b1;
            end else if (settling && !decoupled) begin
                if (settle != 8'hFF)
                    settle <= settle + 8'd1;
                if ({24'd0, settle} == RESET_CYCLES - 1)
                    reload <= 1'b0;
                // The module's constant has crossed both sides' flip-flops,
                // and its port owes it no beat from before.
                if ({24'd0, settle} >= RESET_CYCLES + 3 && !draining) begin
                    settling <= 1'b0;
                    ev_bump <= 1'b1;
                    engine_id <= engine;
                    identity <= 256'd0;
                    table_crc <= 32'd0;
                    if (engine == 32'd0) begin
                        // A greybox: no module.
                        state <= SL_EMPTY;
                        err <= 8'd0;
                    end else if (torn) begin
                        state <= SL_ERROR;
                        err <= SE_TORN;
                    end else begin
                        state <= SL_NO_MODEL;
                        err <= 8'd0;
                    end
                end
            end else if (committing) begin
                watch <= watch + 32'd1;
                if (tbl_done) begin
                    committing <= 1'b0;
                    committed <= commit_val;
                    ev_bump <= 1'b1;
                    if (tbl_result == R_OK) begin
                        state <= SL_READY;
                        err <= 8'd0;
                        table_crc <= tbl_crc;
                        identity <= tbl_identity;
                    end else begin
                        state <= SL_ERROR;
                        err <= (tbl_result == R_BAD) ? SE_BAD_TABLE : SE_TABLE_READ;
                        if (tbl_result != R_BAD) begin
                            ev_fault <= 1'b1;
                            ev_err <= 1'b1;
                            ev_code <= F_TABLE_READ;
                        end
                    end
                end else if (watch == COMMIT_WATCHDOG) begin
                    committing <= 1'b0;
                    committed <= commit_val;
                    state <= SL_ERROR;
                    err <= SE_HUNG;
                    ev_bump <= 1'b1;
                end
            end else if (asked) begin
                if (acts) begin
                    // The requests held end; the engine reads the table.
                    committing <= 1'b1;
                    commit_val <= commit;
                    watch <= 32'd0;
                    tbl_start <= 1'b1;
                    tbl_base <= commit_base;
                    tbl_region <= commit_words;
                    state <= SL_LOADING;
                    err <= 8'd0;
                    identity <= 256'd0;
                    table_crc <= 32'd0;
                    loads <= loads + 32'd1;
                    ev_bump <= 1'b1;
                end else begin
                    committed <= commit;
                    ev_fault <= 1'b1;
                    ev_err <= 1'b1;
                    ev_code <= F_COMMIT_REFUSED;
                    ev_bump <= 1'b1;
                end
            end
            // Its contexts end while it is killed, until none is left.
            if (killing || begins)
                kill <= 1'b1;
            else if (busy == {CPS{1'b0}})
                kill <= 1'b0;
        end
    end
endmodule

`default_nettype wire
