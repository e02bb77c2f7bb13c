// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_shell: the static shell of docs/fabric-contract.md, as parts with
// one job each, talking valid/ready:
//   fabric_axil, fabric_regs   the register window (section 3)
//   fabric_fetch               the submission ring (sections 4-6)
//   fabric_cq                  the completion queue (sections 4-5)
//   fabric_dma_arb, fabric_dma the HP port's master, shared by those
// and per PR slot:
//   fabric_ctx                 its decode contexts, each draw ready ahead
//   fabric_sched               its lanes, steps and ends
//   fabric_step                its step port: a step to the slot, the
//                              token to DDR, the completion entry
//   fabric_end                 requests cancelled, or ended by a load
//   fabric_slot_state          what it holds, and its table commits
//                              (section 7)
// A step out with one slot holds nothing else up: the ring fetch, the
// completion queue and the other slots' steps go on.
//
// The slots sit outside, each behind its fabric_decoupler; every signal
// crossing to a slot leaves a flip-flop here and lands in one there, and
// the other way round (fabric_skid on each channel, on both sides).

`default_nettype none

module fabric_shell #(
    parameter integer SLOTS = 2,
    parameter integer LANES = 4,
    parameter integer CPS = 8,                 // contexts per slot
    parameter integer MAX_PROMPT = 1024,
    parameter integer MAX_OUTPUT = 256,
    parameter [31:0]  INTERFACE_ID = 32'h5EED_0002,
    parameter [31:0]  PREFILL_NS = 32'd20,
    parameter [31:0]  DECODE_NS = 32'd1000,
    parameter integer CLK_MHZ = 100,
    parameter integer DAW = 40,                // DMA address bits
    parameter integer WATCHDOG = 65536,        // fabric cycles a step may take
    // Derived from the parameters above: leave them be.
    parameter integer REQ_W = 142 + DAW,
    parameter integer RSP_W = 43
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 s_awvalid,
    output wire                 s_awready,
    input  wire [11:0]          s_awaddr,
    input  wire                 s_wvalid,
    output wire                 s_wready,
    input  wire [31:0]          s_wdata,
    input  wire [3:0]           s_wstrb,
    output wire                 s_bvalid,
    input  wire                 s_bready,
    output wire [1:0]           s_bresp,
    input  wire                 s_arvalid,
    output wire                 s_arready,
    input  wire [11:0]          s_araddr,
    output wire                 s_rvalid,
    input  wire                 s_rready,
    output wire [31:0]          s_rdata,
    output wire [1:0]           s_rresp,

    output wire [DAW-1:0]       m_araddr,
    output wire [7:0]           m_arlen,
    output wire [2:0]           m_arsize,
    output wire [1:0]           m_arburst,
    output wire                 m_arvalid,
    input  wire                 m_arready,
    input  wire [31:0]          m_rdata,
    input  wire [1:0]           m_rresp,
    input  wire                 m_rlast,
    input  wire                 m_rvalid,
    output wire                 m_rready,
    output wire [DAW-1:0]       m_awaddr,
    output wire [7:0]           m_awlen,
    output wire [2:0]           m_awsize,
    output wire [1:0]           m_awburst,
    output wire                 m_awvalid,
    input  wire                 m_awready,
    output wire [31:0]          m_wdata,
    output wire [3:0]           m_wstrb,
    output wire                 m_wlast,
    output wire                 m_wvalid,
    input  wire                 m_wready,
    input  wire [1:0]           m_bresp,
    input  wire                 m_bvalid,
    output wire                 m_bready,

    output wire                 irq,

    // The slots, through their decouplers.
    output wire [SLOTS-1:0]       slot_req_valid,
    input  wire [SLOTS-1:0]       slot_req_ready,
    output wire [SLOTS*REQ_W-1:0] slot_req_data,
    input  wire [SLOTS-1:0]       slot_rsp_valid,
    output wire [SLOTS-1:0]       slot_rsp_ready,
    input  wire [SLOTS*RSP_W-1:0] slot_rsp_data,
    output wire [SLOTS-1:0]       slot_reload,
    input  wire [SLOTS*32-1:0]    slot_engine,
    output wire [SLOTS-1:0]       slot_tbl_start,
    output wire [SLOTS*DAW-1:0]   slot_tbl_base,
    output wire [SLOTS*32-1:0]    slot_tbl_region,
    input  wire [SLOTS-1:0]       slot_tbl_done,
    input  wire [SLOTS*2-1:0]     slot_tbl_result,
    input  wire [SLOTS*32-1:0]    slot_tbl_crc,
    input  wire [SLOTS*256-1:0]   slot_identity,
    input  wire [SLOTS-1:0]       slot_reading,
    input  wire [SLOTS-1:0]       slot_decoupled,
    input  wire [SLOTS-1:0]       slot_draining,
    // A beat of the slot's engine's reads reached it (its decoupler): a
    // sign of life for the step port's watchdog.
    input  wire [SLOTS-1:0]       slot_progress,
    // The co-simulation's pacing holds a step at its gate (tied low on a
    // board): the watchdog does not count those cycles.
    input  wire [SLOTS-1:0]       slot_hold
);
    localparam integer NCTX = SLOTS * CPS;
    localparam integer LW = (CPS > 1) ? $clog2(CPS) : 1;
    localparam integer EW = 168;
    localparam integer NEV = 2 + 3 * SLOTS;    // fetch, cq, then each slot's step, end, state
    localparam integer NDMA = 2 + SLOTS;       // cq, each slot's step port, fetch
    localparam integer NCQ = 1 + 2 * SLOTS;    // fetch, then each slot's step port and end

    // ---- time: microseconds of fabric clock (fabric_us) --------------------
    reg [31:0] us_now;
    reg [15:0] us_div;
    always @(posedge clk) begin
        if (rst) begin
            us_now <= 32'd0;
            us_div <= 16'd0;
        end else if ({16'd0, us_div} == CLK_MHZ - 1) begin
            us_div <= 16'd0;
            us_now <= us_now + 32'd1;
        end else begin
            us_div <= us_div + 16'd1;
        end
    end

    // ---- the register window --------------------------------------------------
    wire        reg_we, reg_re;
    wire [11:0] reg_waddr, reg_raddr;
    wire [31:0] reg_wdata, reg_rdata;

    fabric_axil #(.AW(12)) axil (
        .clk(clk), .rst(rst),
        .s_awvalid(s_awvalid), .s_awready(s_awready), .s_awaddr(s_awaddr),
        .s_wvalid(s_wvalid), .s_wready(s_wready), .s_wdata(s_wdata), .s_wstrb(s_wstrb),
        .s_bvalid(s_bvalid), .s_bready(s_bready), .s_bresp(s_bresp),
        .s_arvalid(s_arvalid), .s_arready(s_arready), .s_araddr(s_araddr),
        .s_rvalid(s_rvalid), .s_rready(s_rready), .s_rdata(s_rdata), .s_rresp(s_rresp),
        .reg_we(reg_we), .reg_waddr(reg_waddr), .reg_wdata(reg_wdata),
        .reg_re(reg_re), .reg_raddr(reg_raddr), .reg_rdata(reg_rdata)
    );

    wire                 enabled, flush;
    wire [31:0]          sq_tail, cq_head, sq_head, cq_tail;
    wire [SLOTS-1:0]     quiesce;
    wire [NCTX*32-1:0]   cancel;
    wire [DAW-1:0]       sq_addr, cq_addr;
    wire [11:0]          sq_mask, cq_mask;
    wire [31:0]          sq_entries, cq_entries;
    wire [SLOTS*4-1:0]   sl_state;
    wire [SLOTS*8-1:0]   sl_err, sl_active;
    wire [SLOTS*32-1:0]  sl_engine, sl_loads, sl_crc, sl_committed;
    wire [SLOTS*256-1:0] sl_identity;
    wire [SLOTS*DAW-1:0] tbl_base;
    wire [SLOTS*32-1:0]  tbl_words, tbl_commit;
    wire [SLOTS-1:0]     sl_idle;
    wire [NEV-1:0]       ev_bump, ev_err, ev_fault, ev_submitted, ev_completed, ev_cancelled;
    wire [NEV-1:0]       ev_token;
    wire [NEV*8-1:0]     ev_code;

    fabric_regs #(
        .SLOTS(SLOTS), .LANES(LANES), .CPS(CPS), .MAX_PROMPT(MAX_PROMPT),
        .MAX_OUTPUT(MAX_OUTPUT), .INTERFACE_ID(INTERFACE_ID), .PREFILL_NS(PREFILL_NS),
        .DECODE_NS(DECODE_NS), .DAW(DAW), .NEV(NEV)
    ) regs (
        .clk(clk), .rst(rst),
        .reg_we(reg_we), .reg_waddr(reg_waddr), .reg_wdata(reg_wdata),
        .reg_re(reg_re), .reg_raddr(reg_raddr), .reg_rdata(reg_rdata),
        .irq(irq), .sq_tail(sq_tail), .cq_head(cq_head),
        .quiesce(quiesce), .cancel(cancel),
        .tbl_base(tbl_base), .tbl_words(tbl_words), .tbl_commit(tbl_commit),
        .enabled(enabled), .flush(flush), .sq_addr(sq_addr), .sq_mask(sq_mask),
        .sq_entries(sq_entries), .cq_addr(cq_addr), .cq_mask(cq_mask), .cq_entries(cq_entries),
        .sq_head(sq_head), .cq_tail(cq_tail),
        .slot_state(sl_state), .slot_err(sl_err), .slot_engine(sl_engine),
        .slot_loads(sl_loads), .slot_crc(sl_crc), .slot_committed(sl_committed),
        .slot_identity(sl_identity),
        .slot_idle(sl_idle), .slot_active(sl_active),
        .ev_bump(ev_bump), .ev_err(ev_err), .ev_fault(ev_fault), .ev_code(ev_code),
        .ev_submitted(ev_submitted), .ev_completed(ev_completed),
        .ev_cancelled(ev_cancelled), .ev_token(ev_token)
    );

    // ---- the HP port, shared ---------------------------------------------------
    wire [NDMA-1:0]     d_valid, d_ready, d_write, d_rd_valid, d_done;
    wire [NDMA*DAW-1:0] d_addr;
    wire [NDMA*5-1:0]   d_words;
    wire [NDMA*256-1:0] d_wdata;
    wire [31:0]         d_rd_data;
    wire [3:0]          d_rd_index;
    wire                d_err;
    wire                dma_valid, dma_ready, dma_write, dma_rd_valid, dma_done, dma_err;
    wire [DAW-1:0]      dma_addr;
    wire [4:0]          dma_words;
    wire [255:0]        dma_wdata;
    wire [31:0]         dma_rd_data;
    wire [3:0]          dma_rd_index;

    fabric_dma_arb #(.N(NDMA), .AW(DAW)) arb (
        .clk(clk), .rst(rst),
        .cmd_valid(d_valid), .cmd_ready(d_ready), .cmd_write(d_write), .cmd_addr(d_addr),
        .cmd_words(d_words), .cmd_wdata(d_wdata), .rd_valid(d_rd_valid), .rd_data(d_rd_data),
        .rd_index(d_rd_index), .done(d_done), .err(d_err),
        .dma_valid(dma_valid), .dma_ready(dma_ready), .dma_write(dma_write),
        .dma_addr(dma_addr), .dma_words(dma_words), .dma_wdata(dma_wdata),
        .dma_rd_valid(dma_rd_valid), .dma_rd_data(dma_rd_data), .dma_rd_index(dma_rd_index),
        .dma_done(dma_done), .dma_err(dma_err)
    );

    fabric_dma #(.AW(DAW)) dma (
        .clk(clk), .rst(rst),
        .cmd_valid(dma_valid), .cmd_ready(dma_ready), .cmd_write(dma_write),
        .cmd_addr(dma_addr), .cmd_words(dma_words), .cmd_wdata({256'd0, dma_wdata}),
        .rd_valid(dma_rd_valid), .rd_data(dma_rd_data), .rd_index(dma_rd_index),
        .done(dma_done), .err(dma_err),
        .m_araddr(m_araddr), .m_arlen(m_arlen), .m_arsize(m_arsize), .m_arburst(m_arburst),
        .m_arvalid(m_arvalid), .m_arready(m_arready), .m_rdata(m_rdata), .m_rresp(m_rresp),
        .m_rlast(m_rlast), .m_rvalid(m_rvalid), .m_rready(m_rready),
        .m_awaddr(m_awaddr), .m_awlen(m_awlen), .m_awsize(m_awsize), .m_awburst(m_awburst),
        .m_awvalid(m_awvalid), .m_awready(m_awready), .m_wdata(m_wdata), .m_wstrb(m_wstrb),
        .m_wlast(m_wlast), .m_wvalid(m_wvalid), .m_wready(m_wready),
        .m_bresp(m_bresp), .m_bvalid(m_bvalid), .m_bready(m_bready)
    );

    // ---- the completion queue ------------------------------------------------
    wire [NCQ-1:0]    c_valid, c_ready;
    wire [NCQ*EW-1:0] c_entry;

    fabric_cq #(.P(NCQ), .DAW(DAW)) cq (
        .clk(clk), .rst(rst), .flush(flush), .enabled(enabled),
        .cq_addr(cq_addr), .cq_mask(cq_mask), .cq_entries(cq_entries), .cq_head(cq_head),
        .cq_tail(cq_tail),
        .in_valid(c_valid), .in_ready(c_ready), .in_entry(c_entry),
        .dma_valid(d_valid[0]), .dma_ready(d_ready[0]), .dma_addr(d_addr[0 +: DAW]),
        .dma_wdata(d_wdata[0 +: 256]), .dma_done(d_done[0]), .dma_err(d_err),
        .ev_bump(ev_bump[1]), .ev_err(ev_err[1]), .ev_fault(ev_fault[1]), .ev_code(ev_code[8 +: 8])
    );
    assign d_write[0] = 1'b1;
    assign d_words[0 +: 5] = 5'd8;
    assign ev_submitted[1] = 1'b0;
    assign ev_completed[1] = 1'b0;
    assign ev_cancelled[1] = 1'b0;
    assign ev_token[1] = 1'b0;
    wire unused_cq_rd = ^{d_rd_valid[0], d_rd_valid[1 + SLOTS]};

    // ---- the submission ring -------------------------------------------------
    wire [NCTX-1:0]  ctx_busy;
    wire [SLOTS-1:0] usable, acc_valid, acc_ready;
    wire [LW-1:0]    acc_ctx;
    wire [31:0]      acc_tag, acc_a, acc_b, acc_stop;
    wire [63:0]      acc_seed;
    wire             acc_greedy, acc_stream;
    wire [19:0]      acc_inv_t;
    wire [15:0]      acc_max;
    wire [DAW-1:0]   acc_out, acc_prompt;
    wire [15:0]      acc_len;
    localparam integer FD = 1 + SLOTS;         // the fetch's DMA client

    fabric_fetch #(
        .SLOTS(SLOTS), .CPS(CPS), .MAX_PROMPT(MAX_PROMPT), .MAX_OUTPUT(MAX_OUTPUT), .DAW(DAW)
    ) fetch (
        .clk(clk), .rst(rst), .flush(flush), .enabled(enabled),
        .sq_addr(sq_addr), .sq_mask(sq_mask), .sq_entries(sq_entries), .sq_tail(sq_tail),
        .sq_head(sq_head),
        .dma_valid(d_valid[FD]), .dma_ready(d_ready[FD]), .dma_addr(d_addr[DAW * FD +: DAW]),
        .dma_words(d_words[5 * FD +: 5]), .dma_rd_valid(d_rd_valid[FD]),
        .dma_rd_data(d_rd_data), .dma_rd_index(d_rd_index), .dma_done(d_done[FD]),
        .dma_err(d_err),
        .ctx_busy(ctx_busy), .slot_usable(usable),
        .acc_valid(acc_valid), .acc_ready(acc_ready), .acc_ctx(acc_ctx), .acc_tag(acc_tag),
        .acc_a(acc_a), .acc_b(acc_b), .acc_seed(acc_seed), .acc_greedy(acc_greedy),
        .acc_inv_t(acc_inv_t), .acc_max(acc_max), .acc_stop(acc_stop), .acc_out(acc_out),
        .acc_stream(acc_stream), .acc_prompt(acc_prompt), .acc_len(acc_len),
        .ref_valid(c_valid[0]), .ref_ready(c_ready[0]), .ref_entry(c_entry[0 +: EW]),
        .ev_bump(ev_bump[0]), .ev_err(ev_err[0]), .ev_fault(ev_fault[0]),
        .ev_code(ev_code[0 +: 8]), .ev_submitted(ev_submitted[0])
    );
    assign d_write[FD] = 1'b0;
    assign d_wdata[256 * FD +: 256] = 256'd0;
    assign ev_completed[0] = 1'b0;
    assign ev_cancelled[0] = 1'b0;
    assign ev_token[0] = 1'b0;

    // ---- the slots ---------------------------------------------------------------
    genvar g;
    generate
        for (g = 0; g < SLOTS; g = g + 1) begin : slot
            localparam integer EV_STEP = 2 + 3 * g;
            localparam integer EV_END = 3 + 3 * g;
            localparam integer EV_STATE = 4 + 3 * g;
            localparam integer DC = 1 + g;          // its DMA client
            localparam integer CQ_STEP = 1 + 2 * g;  // its completion producers
            localparam integer CQ_END = 2 + 2 * g;

            // What the slot says about itself, registered on this side.
            reg [31:0]  engine, tbl_crc;
            reg         tbl_done, reading, draining, progress;
            reg [1:0]   tbl_result;
            reg [255:0] identity;
            always @(posedge clk) begin
                engine <= slot_engine[32 * g +: 32];
                tbl_done <= slot_tbl_done[g];
                tbl_result <= slot_tbl_result[2 * g +: 2];
                tbl_crc <= slot_tbl_crc[32 * g +: 32];
                identity <= slot_identity[256 * g +: 256];
                reading <= slot_reading[g];
                draining <= slot_draining[g];
                progress <= slot_progress[g];
            end
            wire step_idle, table_fault;

            wire [CPS-1:0] busy, run, draw_ok, hit, can_step, held, lanes_out;
            wire           kill, hung, outstanding, stray, taken;
            wire [LW-1:0]  held_idx, taken_idx, pk_lane;
            wire           gr_valid, pk_valid, en_valid, en_cancel;
            wire [LW-1:0]  gr_idx, pk_idx, en_idx;
            wire           up_valid, fr_step, fr_end;
            wire [LW-1:0]  rd_idx, en_rd_idx, fr_end_idx;
            wire [31:0]    up_token, up_crc;
            wire [15:0]    up_produced;
            wire [31:0]    rd_tag, rd_a, rd_b, rd_draw, rd_stop, rd_crc, rd_us;
            wire           rd_greedy, rd_stream, rd_first;
            wire [DAW-1:0] rd_prompt;
            wire [15:0]    rd_len;
            wire [19:0]    rd_inv_t;
            wire [15:0]    rd_produced, rd_max;
            wire [DAW-1:0] rd_out;
            wire [31:0]    en_tag, en_crc, en_us;
            wire [15:0]    en_produced;
            assign ctx_busy[CPS * g +: CPS] = busy;
            assign sl_active[8 * g +: 8] = {{(8 - LW - 1){1'b0}}, ones(busy)};
            assign acc_ready[g] = 1'b1;
            assign ev_submitted[EV_STEP] = 1'b0;
            assign ev_submitted[EV_END] = 1'b0;
            assign ev_submitted[EV_STATE] = 1'b0;
            assign ev_completed[EV_END] = 1'b0;
            assign ev_completed[EV_STATE] = 1'b0;
            assign ev_cancelled[EV_STEP] = 1'b0;
            assign ev_cancelled[EV_STATE] = 1'b0;
            assign ev_token[EV_END] = 1'b0;
            assign ev_token[EV_STATE] = 1'b0;
            assign ev_fault[EV_END] = 1'b0;

            assign ev_code[8 * EV_END +: 8] = 8'd0;

            assign ev_bump[EV_END] = 1'b0;

            assign d_write[DC] = 1'b1;
            assign d_words[5 * DC +: 5] = 5'd1;
            assign d_wdata[256 * DC + 32 +: 224] = 224'd0;

            // SLOT_SHUTDOWN's idle: no step out with the slot, no read of
            // its engine under way.
            assign sl_idle[g] = step_idle && !reading;

            fabric_slot_state #(.CPS(CPS), .DAW(DAW)) holds (
                .clk(clk), .rst(rst),
                .decoupled(slot_decoupled[g]), .draining(draining), .engine(engine),
                .stray(stray), .hung(hung),
                .table_fault(table_fault), .outstanding(outstanding), .reading(reading),
                .idle(sl_idle[g]), .busy(busy), .quiesce(quiesce[g]),
                .commit(tbl_commit[32 * g +: 32]), .commit_base(tbl_base[DAW * g +: DAW]),
                .commit_words(tbl_words[32 * g +: 32]),
                .tbl_start(slot_tbl_start[g]), .tbl_base(slot_tbl_base[DAW * g +: DAW]),
                .tbl_region(slot_tbl_region[32 * g +: 32]), .tbl_done(tbl_done),
                .tbl_result(tbl_result), .tbl_crc(tbl_crc), .tbl_identity(identity),
                .state(sl_state[4 * g +: 4]), .err(sl_err[8 * g +: 8]),
                .engine_id(sl_engine[32 * g +: 32]), .loads(sl_loads[32 * g +: 32]),
                .table_crc(sl_crc[32 * g +: 32]), .committed(sl_committed[32 * g +: 32]),
                .identity(sl_identity[256 * g +: 256]),
                .kill(kill), .reload(slot_reload[g]), .usable(usable[g]),
                .ev_bump(ev_bump[EV_STATE]), .ev_err(ev_err[EV_STATE]),
                .ev_fault(ev_fault[EV_STATE]), .ev_code(ev_code[8 * EV_STATE +: 8])
            );

            fabric_ctx #(.CPS(CPS), .DAW(DAW)) ctx (
                .clk(clk), .rst(rst), .flush(flush),
                .al_valid(acc_valid[g]), .al_idx(acc_ctx), .al_tag(acc_tag), .al_a(acc_a),
                .al_b(acc_b), .al_seed(acc_seed), .al_greedy(acc_greedy), .al_inv_t(acc_inv_t),
                .al_max(acc_max), .al_stop(acc_stop), .al_out(acc_out), .al_stream(acc_stream),
                .al_us(us_now), .al_prompt(acc_prompt), .al_len(acc_len),
                .gr_valid(gr_valid), .gr_idx(gr_idx), .tk_valid(taken), .tk_idx(taken_idx),
                .up_valid(up_valid), .up_idx(held_idx), .up_token(up_token), .up_crc(up_crc),
                .up_produced(up_produced),
                .fr_step(fr_step), .fr_step_idx(held_idx), .fr_end(fr_end),
                .fr_end_idx(fr_end_idx),
                .cancel(cancel[32 * CPS * g +: 32 * CPS]),
                .busy(busy), .run(run), .draw_ok(draw_ok), .hit(hit),
                .rd_idx(rd_idx), .rd_tag(rd_tag), .rd_a(rd_a), .rd_b(rd_b), .rd_draw(rd_draw),
                .rd_greedy(rd_greedy), .rd_inv_t(rd_inv_t), .rd_produced(rd_produced),
                .rd_max(rd_max), .rd_stop(rd_stop), .rd_out(rd_out), .rd_crc(rd_crc),
                .rd_stream(rd_stream), .rd_us(rd_us), .rd_first(rd_first),
                .rd_prompt(rd_prompt), .rd_len(rd_len),
                .en_idx(en_rd_idx), .en_tag(en_tag), .en_crc(en_crc),
                .en_produced(en_produced), .en_us(en_us)
            );

            fabric_sched #(.CPS(CPS), .LANES(LANES)) sched (
                .clk(clk), .rst(rst), .flush(flush),
                .busy(busy), .run(run), .draw_ok(draw_ok), .hit(hit), .kill(kill),
                .al_valid(acc_valid[g]), .al_idx(acc_ctx),
                .held(held), .lanes_out(lanes_out), .taken(taken), .taken_idx(taken_idx),
                .gr_valid(gr_valid), .gr_idx(gr_idx), .pk_valid(pk_valid), .pk_idx(pk_idx),
                .pk_lane(pk_lane),
                .en_valid(en_valid), .en_idx(en_idx), .en_cancel(en_cancel),
                .can_step(can_step)
            );

            fabric_step #(.SLOT(g), .CPS(CPS), .DAW(DAW), .WATCHDOG(WATCHDOG)) step (
                .clk(clk), .rst(rst), .flush(flush), .usable(usable[g]),
                .decoupled(slot_decoupled[g]), .hold(slot_hold[g]), .progress(progress),
                .us_now(us_now),
                .pk_valid(pk_valid), .pk_idx(pk_idx), .pk_lane(pk_lane), .can_step(can_step),
                .taken(taken), .taken_idx(taken_idx), .idx(held_idx), .held(held),
                .lane_out(lanes_out),
                .rd_idx(rd_idx), .rd_tag(rd_tag), .rd_a(rd_a), .rd_b(rd_b), .rd_draw(rd_draw),
                .rd_greedy(rd_greedy), .rd_inv_t(rd_inv_t), .rd_produced(rd_produced),
                .rd_max(rd_max), .rd_stop(rd_stop), .rd_out(rd_out), .rd_crc(rd_crc),
                .rd_stream(rd_stream), .rd_us(rd_us), .rd_first(rd_first),
                .rd_prompt(rd_prompt), .rd_len(rd_len),
                .up_valid(up_valid), .up_token(up_token), .up_crc(up_crc),
                .up_produced(up_produced), .fr_valid(fr_step),
                .slot_req_valid(slot_req_valid[g]), .slot_req_ready(slot_req_ready[g]),
                .slot_req_data(slot_req_data[REQ_W * g +: REQ_W]),
                .slot_rsp_valid(slot_rsp_valid[g]), .slot_rsp_ready(slot_rsp_ready[g]),
                .slot_rsp_data(slot_rsp_data[RSP_W * g +: RSP_W]),
                .dma_valid(d_valid[DC]), .dma_ready(d_ready[DC]),
                .dma_addr(d_addr[DAW * DC +: DAW]), .dma_wdata(d_wdata[256 * DC +: 32]),
                .dma_done(d_done[DC]), .dma_err(d_err),
                .cq_valid(c_valid[CQ_STEP]), .cq_ready(c_ready[CQ_STEP]),
                .cq_entry(c_entry[EW * CQ_STEP +: EW]),
                .ev_bump(ev_bump[EV_STEP]), .ev_err(ev_err[EV_STEP]),
                .ev_fault(ev_fault[EV_STEP]), .ev_code(ev_code[8 * EV_STEP +: 8]),
                .ev_completed(ev_completed[EV_STEP]), .ev_token(ev_token[EV_STEP]),
                .hung(hung), .table_fault(table_fault), .outstanding(outstanding),
                .idle(step_idle), .stray(stray)
            );

            fabric_end #(.SLOT(g), .CPS(CPS)) ender (
                .clk(clk), .rst(rst), .flush(flush), .us_now(us_now),
                .en_valid(en_valid), .en_idx(en_idx), .en_cancel(en_cancel), .busy(busy),
                .hit(hit), .kill(kill), .held(held),
                .rd_idx(en_rd_idx), .rd_tag(en_tag), .rd_crc(en_crc), .rd_produced(en_produced),
                .rd_us(en_us),
                .fr_valid(fr_end), .fr_idx(fr_end_idx),
                .cq_valid(c_valid[CQ_END]), .cq_ready(c_ready[CQ_END]),
                .cq_entry(c_entry[EW * CQ_END +: EW]),
                .ev_err(ev_err[EV_END]), .ev_cancelled(ev_cancelled[EV_END])
            );

        end
    endgenerate

    function [LW:0] ones(input [CPS-1:0] v);
        integer k;
        begin
            ones = {(LW + 1){1'b0}};
            for (k = 0; k < CPS; k = k + 1)
                ones = ones + {{LW{1'b0}}, v[k]};
        end
    endfunction
endmodule

`default_nettype wire
