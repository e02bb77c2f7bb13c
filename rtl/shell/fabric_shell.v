// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_shell: the static shell of docs/fabric-contract.md: the register
// window (section 3) behind an AXI4-Lite slave, the rings in DDR through an
// AXI4 master (sections 4 and 5), the decode contexts with their on-chip
// queue and lanes, the level interrupt, the faults (section 6), and per PR
// slot the quiesce and shutdown status and the reconfiguration handshake
// (section 7). The slots sit outside, each behind its fabric_decoupler.
//
// One sequencer does everything that touches DDR or a slot, one thing at a
// time, in this order of priority: post a waiting completion entry; end the
// contexts of a slot that was reprogrammed; end a cancelled request; give a
// free lane to the oldest waiting context; read a descriptor; run one decode
// step of the next running context (round robin). A step asks the slot's
// engine for the next token, writes it to the request's output, and queues
// a completion entry when the request ends (or for every token with
// STREAM). Completion entries wait on chip (CQ_FIFO of them) until the
// completion ring has room, so the host's pace never loses one; while the
// on-chip queue is full, nothing that could add to it starts.

`default_nettype none

module fabric_shell #(
    parameter integer SLOTS = 2,
    parameter integer LANES = 4,
    parameter integer CPS = 8,                 // contexts per slot
    parameter integer MAX_PROMPT = 1024,
    parameter integer MAX_OUTPUT = 256,
    parameter [31:0]  INTERFACE_ID = 32'h5EED_0001,
    parameter [31:0]  PREFILL_NS = 32'd20,
    parameter [31:0]  DECODE_NS = 32'd1000,
    parameter integer CLK_MHZ = 100,
    parameter integer DAW = 40,                // DMA address bits
    parameter integer WATCHDOG = 65536         // cycles a decode step may take
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

    output reg                  irq,

    // The slots, through their decouplers. The step's operands go to every
    // slot; only the addressed one sees req_valid.
    output reg  [SLOTS-1:0]     slot_req_valid,
    input  wire [SLOTS-1:0]     slot_req_ready,
    output reg  [31:0]          step_a,
    output reg  [31:0]          step_b,
    output reg  [31:0]          step_draw,
    output reg                  step_greedy,
    output reg  [19:0]          step_inv_t,
    input  wire [SLOTS-1:0]     slot_rsp_valid,
    output reg  [SLOTS-1:0]     slot_rsp_ready,
    input  wire [SLOTS*32-1:0]  slot_rsp_token,
    input  wire [SLOTS-1:0]     slot_rsp_fault,
    output reg  [SLOTS-1:0]     slot_reload,
    input  wire [SLOTS-1:0]     slot_table_ok,
    input  wire [SLOTS-1:0]     slot_table_blank,
    input  wire [SLOTS*256-1:0] slot_identity,
    input  wire [SLOTS-1:0]     slot_decoupled
);
`include "fabric_crc32.vh"

    localparam integer NCTX = SLOTS * CPS;
    localparam integer CW = (NCTX > 1) ? $clog2(NCTX) : 1;
    localparam integer SW = (SLOTS > 1) ? $clog2(SLOTS) : 1;
    localparam integer QD = 8;                 // completion entries held on chip
    localparam [31:0]  MAGIC = 32'h4641_4252;  // "FABR"
    localparam [31:0]  VERSION = {16'd1, 16'd1};
    localparam [31:0]  EOS = 32'd256;

    // Fault codes (section 6), completion status and kind (section 4).
    localparam [7:0] F_BAD_CRC = 8'd1, F_STALE = 8'd2, F_BUSY = 8'd3, F_NOT_READY = 8'd4,
                     F_RING = 8'd5, F_DECODER = 8'd6;
    localparam [7:0] ST_OK = 8'd0, ST_CANCELLED = 8'd1, ST_BAD = 8'd2, ST_NOT_READY = 8'd3,
                     ST_FAULT = 8'd4, ST_STALE = 8'd5;
    localparam [7:0] K_TOKENS = 8'd1, K_DONE = 8'd2;
    localparam [7:0] FIN_NONE = 8'd0, FIN_LENGTH = 8'd1, FIN_STOP = 8'd2;
    // Slot states and their error codes.
    localparam [3:0] SL_EMPTY = 4'd0, SL_LOADING = 4'd1, SL_READY = 4'd2, SL_ERROR = 4'd3;
    // SLOT_STATE.ERROR codes (fabric_hw::contract::slot_error).
    localparam [7:0] SE_NO_TABLE = 8'd2, SE_TORN = 8'd4, SE_HUNG = 8'd5;

    // ---- the register port ------------------------------------------------
    wire        reg_we, reg_re;
    wire [11:0] reg_waddr, reg_raddr;
    wire [31:0] reg_wdata;
    reg  [31:0] reg_rdata;

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

    // ---- the DMA master ---------------------------------------------------
    reg            dma_valid, dma_write;
    reg  [DAW-1:0] dma_addr;
    reg  [4:0]     dma_words;
    reg  [511:0]   dma_wdata;
    wire           dma_ready, dma_rd_valid, dma_done, dma_err;
    wire [31:0]    dma_rd_data;
    wire [3:0]     dma_rd_index;

    fabric_dma #(.AW(DAW)) dma (
        .clk(clk), .rst(rst),
        .cmd_valid(dma_valid), .cmd_ready(dma_ready), .cmd_write(dma_write),
        .cmd_addr(dma_addr), .cmd_words(dma_words), .cmd_wdata(dma_wdata),
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

    // ---- host-written registers ---------------------------------------------
    reg [1:0]  control;            // IRQ_ENABLE, ENABLE
    reg [31:0] sq_base_lo, sq_base_hi, sq_entries, cq_base_lo, cq_base_hi, cq_entries;
    reg [31:0] sq_tail, cq_head, event_ack;
    reg [SLOTS-1:0] quiesce;
    reg [31:0] cancel [0:NCTX-1];

    // ---- device state ---------------------------------------------------------
    reg        enabled, ring_fault;
    reg [1:0]  control_seen;
    reg [31:0] sq_head, cq_tail, event_seq, fault_code;
    reg [31:0] cnt_submitted, cnt_completed, cnt_cancelled, cnt_tokens, cnt_errors;
    reg [DAW-1:0] sq_addr, cq_addr;
    reg [11:0] sq_mask, cq_mask;
    reg [31:0] us_now;
    reg [15:0] us_div;

    // Contexts.
    reg [NCTX-1:0] c_busy, c_run, c_stream, c_greedy;
    reg [31:0] c_tag [0:NCTX-1];
    reg [31:0] c_a [0:NCTX-1];
    reg [31:0] c_b [0:NCTX-1];
    reg [63:0] c_rng [0:NCTX-1];
    reg [19:0] c_inv_t [0:NCTX-1];
    reg [15:0] c_produced [0:NCTX-1];
    reg [15:0] c_max [0:NCTX-1];
    reg [31:0] c_stop [0:NCTX-1];
    reg [DAW-1:0] c_out [0:NCTX-1];
    reg [31:0] c_crc [0:NCTX-1];
    reg [31:0] c_start_us [0:NCTX-1];
    reg [31:0] c_order [0:NCTX-1];
    reg [31:0] order_next;

    // Slots.
    reg [3:0]   sl_state [0:SLOTS-1];
    reg [7:0]   sl_err [0:SLOTS-1];
    reg [31:0]  sl_loads [0:SLOTS-1];
    reg [255:0] sl_hash [0:SLOTS-1];
    reg [SLOTS-1:0] sl_dec_seen, sl_kill, sl_torn, sl_settling;
    reg [1:0]   sl_settle [0:SLOTS-1];
    reg [SLOTS-1:0] sl_busy_step;       // a step is outstanding to the slot

    // The completion entries waiting for the ring.
    reg [31:0] q_tag [0:QD-1];
    reg [15:0] q_ctx [0:QD-1];
    reg [7:0]  q_kind [0:QD-1];
    reg [7:0]  q_status [0:QD-1];
    reg [31:0] q_n [0:QD-1];
    reg [31:0] q_crc [0:QD-1];
    reg [31:0] q_us [0:QD-1];
    reg [7:0]  q_fin [0:QD-1];
    reg [2:0]  q_rd, q_wr;
    reg [3:0]  q_count;

    // ---- combinational views --------------------------------------------------
    integer k;
    reg [7:0] slot_active [0:SLOTS-1];
    reg [7:0] slot_running [0:SLOTS-1];
    always @(*) begin
        for (k = 0; k < SLOTS; k = k + 1) begin
            slot_active[k] = 8'd0;
            slot_running[k] = 8'd0;
        end
        for (k = 0; k < NCTX; k = k + 1) begin
            if (c_busy[k])
                slot_active[k / CPS] = slot_active[k / CPS] + 8'd1;
            if (c_busy[k] && c_run[k])
                slot_running[k / CPS] = slot_running[k / CPS] + 8'd1;
        end
    end

    wire [31:0] cnt_active;
    reg  [31:0] active_sum;
    always @(*) begin
        active_sum = 32'd0;
        for (k = 0; k < NCTX; k = k + 1)
            active_sum = active_sum + {31'd0, c_busy[k]};
    end
    assign cnt_active = active_sum;

    function slot_usable(input integer s);
        slot_usable = sl_state[s] == SL_READY && !quiesce[s] && !slot_decoupled[s] &&
                      !sl_kill[s] && !sl_settling[s];
    endfunction

    // The first context (from the round-robin pointer on) that may step now.
    reg [CW-1:0] rr;
    reg          step_found;
    reg [CW-1:0] step_ctx;
    integer      j, cidx;
    always @(*) begin
        step_found = 1'b0;
        step_ctx = {CW{1'b0}};
        for (j = 0; j < NCTX; j = j + 1) begin
            cidx = (rr + j) % NCTX;
            if (!step_found && c_busy[cidx] && c_run[cidx] &&
                slot_usable(cidx / CPS) && slot_req_ready[cidx / CPS]) begin
                step_found = 1'b1;
                step_ctx = cidx[CW-1:0];
            end
        end
    end

    // A context to end: its slot was reprogrammed, or the host cancelled it.
    reg          end_found, end_cancel;
    reg [CW-1:0] end_ctx;
    always @(*) begin
        end_found = 1'b0;
        end_cancel = 1'b0;
        end_ctx = {CW{1'b0}};
        for (j = 0; j < NCTX; j = j + 1) begin
            if (!end_found && c_busy[j] && sl_kill[j / CPS]) begin
                end_found = 1'b1;
                end_ctx = j[CW-1:0];
            end
        end
`ifndef FABRIC_BREAK_CANCEL
        for (j = 0; j < NCTX; j = j + 1) begin
            if (!end_found && c_busy[j] && cancel[j] == c_tag[j]) begin
                end_found = 1'b1;
                end_cancel = 1'b1;
                end_ctx = j[CW-1:0];
            end
        end
`endif
    end

    // The oldest waiting context of a slot with a free lane.
    reg          lane_found;
    reg [CW-1:0] lane_ctx;
    reg [31:0]   lane_order;
    always @(*) begin
        lane_found = 1'b0;
        lane_ctx = {CW{1'b0}};
        lane_order = 32'd0;
        for (j = 0; j < NCTX; j = j + 1) begin
            if (c_busy[j] && !c_run[j] && slot_running[j / CPS] < LANES &&
                (!lane_found || (c_order[j] - lane_order) >= 32'h8000_0000)) begin
                lane_found = 1'b1;
                lane_ctx = j[CW-1:0];
                lane_order = c_order[j];
            end
        end
    end

    // The interrupt: exactly the contract's equation.
    always @(posedge clk)
`ifdef FABRIC_BREAK_IRQ
        irq <= !rst && enabled && control[1] && cq_tail != cq_head;
`else
        irq <= !rst && enabled && control[1] && (cq_tail != cq_head || event_seq != event_ack);
`endif

    // ---- register reads -------------------------------------------------------
    wire [5:0]  rd_slot_sel = reg_raddr[11:6] - 6'd4;
    wire [5:0]  rd_slot_off = reg_raddr[5:0];
    wire [9:0]  rd_ctx_sel = reg_raddr[11:2] - 10'h100;
    function [31:0] shutdown_bits(input integer s);
        reg q, read_idle;
        begin
            q = quiesce[s];
            read_idle = !sl_busy_step[s];
            // DFX AXI Shutdown Manager: requested, both channels, write, read.
            shutdown_bits = {28'd0, q && read_idle, q, q && read_idle, q};
        end
    endfunction

    always @(posedge clk) begin
        if (reg_re) begin
            reg_rdata <= 32'd0;
            if (reg_raddr < 12'h100) begin
                case (reg_raddr)
                    12'h000: reg_rdata <= MAGIC;
                    12'h004: reg_rdata <= VERSION;
                    12'h008: reg_rdata <= SLOTS[3:0] | (LANES[7:0] << 4) | (CPS[7:0] << 12);
                    12'h00C: reg_rdata <= MAX_PROMPT;
                    12'h010: reg_rdata <= MAX_OUTPUT;
                    12'h014: reg_rdata <= INTERFACE_ID;
                    12'h018: reg_rdata <= PREFILL_NS;
                    12'h01C: reg_rdata <= DECODE_NS;
                    12'h020: reg_rdata <= {30'd0, control};
                    12'h024: reg_rdata <= {29'd0, ring_fault, 1'b0, enabled};
                    12'h028: reg_rdata <= sq_base_lo;
                    12'h02C: reg_rdata <= sq_base_hi;
                    12'h030: reg_rdata <= sq_entries;
                    12'h034: reg_rdata <= cq_base_lo;
                    12'h038: reg_rdata <= cq_base_hi;
                    12'h03C: reg_rdata <= cq_entries;
                    12'h040: reg_rdata <= sq_tail;
                    12'h044: reg_rdata <= sq_head;
                    12'h048: reg_rdata <= cq_head;
                    12'h04C: reg_rdata <= cq_tail;
                    12'h050: reg_rdata <= event_seq;
                    12'h054: reg_rdata <= event_ack;
                    12'h058: reg_rdata <= fault_code;
                    12'h060: reg_rdata <= cnt_submitted;
                    12'h064: reg_rdata <= cnt_completed;
                    12'h068: reg_rdata <= cnt_cancelled;
                    12'h06C: reg_rdata <= cnt_active;
                    12'h070: reg_rdata <= cnt_tokens;
                    12'h074: reg_rdata <= cnt_errors;
                    default: ;
                endcase
            end else if (reg_raddr < 12'h300) begin
                if (rd_slot_sel < SLOTS) begin
                    case (rd_slot_off)
                        6'h00: reg_rdata <= {16'd0, sl_err[rd_slot_sel], 4'd0, sl_state[rd_slot_sel]};
                        6'h08: reg_rdata <= {31'd0, quiesce[rd_slot_sel]};
                        6'h0C: reg_rdata <= shutdown_bits(rd_slot_sel);
                        6'h10: reg_rdata <= {24'd0, slot_active[rd_slot_sel]};
                        6'h14: reg_rdata <= sl_loads[rd_slot_sel];
                        6'h20, 6'h24, 6'h28, 6'h2C, 6'h30, 6'h34, 6'h38, 6'h3C:
                            reg_rdata <= sl_hash[rd_slot_sel][255 - 32 * (rd_slot_off[4:2]) -: 32];
                        default: ;
                    endcase
                end
            end else if (reg_raddr >= 12'h400 && reg_raddr < 12'h800) begin
                if (rd_ctx_sel < NCTX)
                    reg_rdata <= cancel[rd_ctx_sel];
            end
        end
    end

    // ---- the sequencer --------------------------------------------------------
    localparam [4:0]
        Q_IDLE       = 5'd0,
        Q_POST       = 5'd1,
        Q_FETCH      = 5'd2,
        Q_DESC       = 5'd3,
        Q_DIV        = 5'd4,
        Q_PA         = 5'd5,
        Q_PA_WAIT    = 5'd6,
        Q_PB         = 5'd7,
        Q_PB_WAIT    = 5'd8,
        Q_ACCEPT     = 5'd9,
        Q_STEP       = 5'd10,
        Q_TOKEN      = 5'd11,
        Q_TOKEN_WAIT = 5'd12;
    reg [4:0] q;

    // The descriptor being read, and what the checks made of it.
    reg [31:0] d [0:15];
    reg [31:0] d_crc;
    reg        d_err;
    reg [31:0] d_seq;
    // The divider for floor(2^shift / M).
    reg [41:0] div_num;
    reg [23:0] div_m;
    reg [24:0] div_rem;
    reg [41:0] div_q;
    reg [5:0]  div_i;
    reg        d_greedy;
    reg [19:0] d_inv_t;
    reg [31:0] d_a;
    // The step.
    reg [CW-1:0] s_ctx;
    reg [SW-1:0] s_slot;
    reg [16:0]   s_watch;
    reg [31:0]   s_token;

    wire [CW-1:0] d_ctx = d[3][CW-1:0];
    wire [7:0]    d_slot = d[1][23:16];
    wire [31:0]   d_temp = d[11];
    wire [7:0]    d_exp = d_temp[30:23];
    wire [63:0]   d_prompt_addr = {d[5], d[4]};
    wire [63:0]   d_output_addr = {d[9], d[8]};
    wire [63:0]   d_prompt_last = d_prompt_addr + {30'd0, d[6], 2'b00} - 64'd4;
    wire          d_fields_ok =
        d[1][15:0] == 16'd1 && d[2] != 32'd0 && d[3][15:0] < NCTX && d_slot < SLOTS &&
        ({16'd0, d[3][15:0]} / CPS) == {24'd0, d_slot} &&
        d[6] >= 32'd1 && d[6] <= MAX_PROMPT && d[7] >= 32'd1 && d[7] <= MAX_OUTPUT &&
        d[10] >= d[7] && (d_prompt_addr >> DAW) == 64'd0 && (d_output_addr >> DAW) == 64'd0;

    // SplitMix64 of the stepping context.
    wire [63:0] mix0 = c_rng[step_ctx] + 64'h9E37_79B9_7F4A_7C15;
    wire [63:0] mix1 = (mix0 ^ (mix0 >> 30)) * 64'hBF58_476D_1CE4_E5B9;
    wire [63:0] mix2 = (mix1 ^ (mix1 >> 27)) * 64'h94D0_49BB_1331_11EB;
    wire [63:0] mix3 = mix2 ^ (mix2 >> 31);

    wire [63:0] sq_base = {sq_base_hi, sq_base_lo};
    wire [63:0] cq_base = {cq_base_hi, cq_base_lo};
    wire        cq_room = (cq_tail - cq_head) < cq_entries;
    wire        q_room = q_count < QD;
    wire [31:0] sq_pending = sq_tail - sq_head;
    wire [31:0] step_token = slot_rsp_token[32 * s_slot +: 32];
    wire [31:0] step_crc = crc32_word(c_crc[s_ctx], s_token);
    wire [15:0] step_produced = c_produced[s_ctx] + 16'd1;

    // The completion entry at the head of the queue, as its eight words.
    wire [31:0] cqe_w0 = cq_tail;
    wire [31:0] cqe_w2 = {q_status[q_rd], q_kind[q_rd], q_ctx[q_rd]};
    wire [31:0] cqe_w6 = {24'd0, q_fin[q_rd]};
    wire [31:0] cqe_crc = ~crc32_word(crc32_word(crc32_word(crc32_word(crc32_word(crc32_word(
        crc32_word(32'hFFFF_FFFF, cqe_w0), q_tag[q_rd]), cqe_w2), q_n[q_rd]), q_crc[q_rd]),
        q_us[q_rd]), cqe_w6);

    integer e;
    reg [7:0] bumps;

    // Queues a completion entry (callers check q_room first).
    task push(input [31:0] tag, input [15:0] ctx, input [7:0] kind, input [7:0] status,
              input [31:0] n, input [31:0] crc, input [31:0] us, input [7:0] fin);
        begin
            q_tag[q_wr] <= tag;
            q_ctx[q_wr] <= ctx;
            q_kind[q_wr] <= kind;
            q_status[q_wr] <= status;
            q_n[q_wr] <= n;
            q_crc[q_wr] <= crc;
            q_us[q_wr] <= us;
            q_fin[q_wr] <= fin;
            q_wr <= q_wr + 3'd1;
        end
    endtask

    // Ends context `c` with a DONE entry.
    task finish(input [CW-1:0] c, input [7:0] status, input [7:0] fin, input [31:0] crc_final,
                input [15:0] produced);
        begin
            push(c_tag[c], {{(16 - CW){1'b0}}, c}, K_DONE, status, {16'd0, produced},
                 crc_final, us_now - c_start_us[c], fin);
            c_busy[c] <= 1'b0;
            c_run[c] <= 1'b0;
            case (status)
                ST_OK: cnt_completed <= cnt_completed + 32'd1;
                ST_CANCELLED: cnt_cancelled <= cnt_cancelled + 32'd1;
                default: cnt_errors <= cnt_errors + 32'd1;
            endcase
        end
    endtask

    always @(posedge clk) begin
        dma_valid <= 1'b0;
        slot_reload <= {SLOTS{1'b0}};
        bumps = 8'd0;
        if (rst) begin
            control <= 2'd0;
            control_seen <= 2'd0;
            sq_base_lo <= 32'd0; sq_base_hi <= 32'd0; sq_entries <= 32'd0;
            cq_base_lo <= 32'd0; cq_base_hi <= 32'd0; cq_entries <= 32'd0;
            sq_tail <= 32'd0; cq_head <= 32'd0; event_ack <= 32'd0;
            quiesce <= {SLOTS{1'b0}};
            for (e = 0; e < NCTX; e = e + 1)
                cancel[e] <= 32'd0;
            enabled <= 1'b0;
            ring_fault <= 1'b0;
            sq_head <= 32'd0; cq_tail <= 32'd0; event_seq <= 32'd0; fault_code <= 32'd0;
            cnt_submitted <= 32'd0; cnt_completed <= 32'd0; cnt_cancelled <= 32'd0;
            cnt_tokens <= 32'd0; cnt_errors <= 32'd0;
            us_now <= 32'd0; us_div <= 16'd0;
            c_busy <= {NCTX{1'b0}};
            c_run <= {NCTX{1'b0}};
            order_next <= 32'd0;
            for (e = 0; e < SLOTS; e = e + 1) begin
                sl_state[e] <= SL_EMPTY;
                sl_err[e] <= 8'd0;
                sl_loads[e] <= 32'd0;
                sl_hash[e] <= 256'd0;
                sl_settle[e] <= 2'd0;
            end
            sl_dec_seen <= {SLOTS{1'b0}};
            sl_kill <= {SLOTS{1'b0}};
            sl_torn <= {SLOTS{1'b0}};
            // Power-on: every slot reads its table, as after a load.
            sl_settling <= {SLOTS{1'b1}};
            sl_busy_step <= {SLOTS{1'b0}};
            slot_req_valid <= {SLOTS{1'b0}};
            slot_rsp_ready <= {SLOTS{1'b0}};
            q_rd <= 3'd0; q_wr <= 3'd0; q_count <= 4'd0;
            rr <= {CW{1'b0}};
            q <= Q_IDLE;
        end else begin
            // Time, in microseconds of fabric clock.
            if (us_div == CLK_MHZ - 1) begin
                us_div <= 16'd0;
                us_now <= us_now + 32'd1;
            end else begin
                us_div <= us_div + 16'd1;
            end

            // Host writes: one writer per word, so device registers ignore them.
            if (reg_we) begin
                case (reg_waddr)
                    12'h020: control <= reg_wdata[1:0];
                    12'h028: sq_base_lo <= reg_wdata;
                    12'h02C: sq_base_hi <= reg_wdata;
                    12'h030: sq_entries <= reg_wdata;
                    12'h034: cq_base_lo <= reg_wdata;
                    12'h038: cq_base_hi <= reg_wdata;
                    12'h03C: cq_entries <= reg_wdata;
                    12'h040: sq_tail <= reg_wdata;
                    12'h048: cq_head <= reg_wdata;
                    12'h054: event_ack <= reg_wdata;
                    default: ;
                endcase
                if (reg_waddr >= 12'h100 && reg_waddr < 12'h300 && reg_waddr[5:0] == 6'h08 &&
                    (reg_waddr[11:6] - 6'd4) < SLOTS)
                    quiesce[reg_waddr[11:6] - 6'd4] <= reg_wdata[0];
                if (reg_waddr >= 12'h400 && reg_waddr < 12'h800 &&
                    (reg_waddr[11:2] - 10'h100) < NCTX)
                    cancel[reg_waddr[11:2] - 10'h100] <= reg_wdata;
            end

            // Each slot: decoupled means a load is under way; coupled again,
            // the slot reads its table and says what it now holds.
            for (e = 0; e < SLOTS; e = e + 1) begin
                sl_dec_seen[e] <= slot_decoupled[e];
                if (slot_decoupled[e] && !sl_dec_seen[e]) begin
                    sl_state[e] <= SL_LOADING;
                    sl_err[e] <= 8'd0;
                    sl_kill[e] <= 1'b1;
                    sl_settling[e] <= 1'b0;
                    bumps = bumps + 8'd1;
                    // A step outstanding as the slot is cut off is lost;
                    // otherwise the load starts clean, whatever came before.
                    sl_torn[e] <= sl_busy_step[e];
                end
                if (!slot_decoupled[e] && sl_dec_seen[e]) begin
                    slot_reload[e] <= 1'b1;
                    sl_settling[e] <= 1'b1;
                    sl_settle[e] <= 2'd0;
                end
                // An answer with no step outstanding: what a slot reprogrammed
                // while coupled drives.
                if (slot_rsp_valid[e] && !sl_busy_step[e] && !sl_torn[e] && !slot_decoupled[e]) begin
                    sl_torn[e] <= 1'b1;
                    sl_state[e] <= SL_ERROR;
                    sl_err[e] <= SE_TORN;
                    sl_kill[e] <= 1'b1;
                    bumps = bumps + 8'd1;
                end
                if (sl_settling[e] && !slot_decoupled[e]) begin
                    if (sl_settle[e] != 2'd3) begin
                        sl_settle[e] <= sl_settle[e] + 2'd1;
                    end else if (slot_req_ready[e]) begin
                        sl_settling[e] <= 1'b0;
                        bumps = bumps + 8'd1;
                        if (sl_torn[e]) begin
                            sl_state[e] <= SL_ERROR;
                            sl_err[e] <= SE_TORN;
                        end else if (slot_table_ok[e]) begin
                            sl_state[e] <= SL_READY;
                            sl_err[e] <= 8'd0;
                            sl_hash[e] <= slot_identity[256 * e +: 256];
                            sl_loads[e] <= sl_loads[e] + 32'd1;
                        end else begin
                            // A blank region holds no module; anything
                            // else without a table is a bad image.
                            sl_state[e] <= slot_table_blank[e] ? SL_EMPTY : SL_ERROR;
                            sl_err[e] <= slot_table_blank[e] ? 8'd0 : SE_NO_TABLE;
                            sl_hash[e] <= 256'd0;
                        end
                    end
                end
            end

            case (q)
                Q_IDLE: begin
                    if (control[0] && !control_seen[0]) begin
                        // ENABLE rose: check the rings, then start afresh.
                        control_seen <= control;
                        c_busy <= {NCTX{1'b0}};
                        c_run <= {NCTX{1'b0}};
                        q_rd <= 3'd0; q_wr <= 3'd0; q_count <= 4'd0;
                        sq_head <= 32'd0;
                        cq_tail <= 32'd0;
                        if (sq_entries >= 32'd2 && sq_entries <= 32'd4096 &&
                            (sq_entries & (sq_entries - 32'd1)) == 32'd0 &&
                            cq_entries >= 32'd2 && cq_entries <= 32'd4096 &&
                            (cq_entries & (cq_entries - 32'd1)) == 32'd0 &&
                            sq_base_lo[5:0] == 6'd0 && cq_base_lo[4:0] == 5'd0 &&
                            ({sq_base_hi, sq_base_lo} >> DAW) == 64'd0 &&
                            ({cq_base_hi, cq_base_lo} >> DAW) == 64'd0) begin
                            enabled <= 1'b1;
                            ring_fault <= 1'b0;
                            sq_addr <= sq_base[DAW-1:0];
                            cq_addr <= cq_base[DAW-1:0];
                            sq_mask <= sq_entries[11:0] - 12'd1;
                            cq_mask <= cq_entries[11:0] - 12'd1;
                        end else begin
                            enabled <= 1'b0;
                            ring_fault <= 1'b1;
                            fault_code <= {24'd0, F_RING};
                            cnt_errors <= cnt_errors + 32'd1;
                            bumps = bumps + 8'd1;
                        end
                    end else if (!control[0] && control_seen[0]) begin
                        control_seen <= control;
                        enabled <= 1'b0;
                        ring_fault <= 1'b0;
                        c_busy <= {NCTX{1'b0}};
                        c_run <= {NCTX{1'b0}};
                        q_rd <= 3'd0; q_wr <= 3'd0; q_count <= 4'd0;
                    end else if (!enabled) begin
                        control_seen <= control;
                    end else if (q_count != 4'd0 && cq_room) begin
                        dma_valid <= 1'b1;
                        dma_write <= 1'b1;
                        dma_addr <= cq_addr + {{(DAW - 17){1'b0}}, cq_tail[11:0] & cq_mask, 5'd0};
                        dma_words <= 5'd8;
                        dma_wdata <= {256'd0, cqe_crc, cqe_w6, q_us[q_rd], q_crc[q_rd],
                                      q_n[q_rd], cqe_w2, q_tag[q_rd], cqe_w0};
                        q <= Q_POST;
                    end else if (q_room && end_found) begin
                        if (end_cancel)
                            finish(end_ctx, ST_CANCELLED, FIN_NONE, ~c_crc[end_ctx],
                                   c_produced[end_ctx]);
                        else
                            finish(end_ctx, ST_FAULT, FIN_NONE, ~c_crc[end_ctx],
                                   c_produced[end_ctx]);
                        q_count <= q_count + 4'd1;
                    end else if (lane_found) begin
                        c_run[lane_ctx] <= 1'b1;
                    end else if (q_room && sq_pending != 32'd0 && sq_pending <= sq_entries) begin
                        dma_valid <= 1'b1;
                        dma_write <= 1'b0;
                        dma_addr <= sq_addr + {{(DAW - 18){1'b0}}, sq_head[11:0] & sq_mask, 6'd0};
                        dma_words <= 5'd16;
                        d_crc <= 32'hFFFF_FFFF;
                        d_seq <= sq_head;
                        q <= Q_FETCH;
                    end else if (q_room && step_found) begin
                        s_ctx <= step_ctx;
                        s_slot <= step_ctx / CPS;
                        c_rng[step_ctx] <= mix0;
                        step_a <= c_a[step_ctx];
                        step_b <= c_b[step_ctx];
                        step_draw <= mix3[63:32];
                        step_greedy <= c_greedy[step_ctx];
                        step_inv_t <= c_inv_t[step_ctx];
                        slot_req_valid[step_ctx / CPS] <= 1'b1;
                        sl_busy_step[step_ctx / CPS] <= 1'b1;
                        s_watch <= 17'd0;
                        rr <= (step_ctx == NCTX - 1) ? {CW{1'b0}} : step_ctx + 1'b1;
                        q <= Q_STEP;
                    end
                end

                Q_POST: begin
                    if (dma_done) begin
                        q_rd <= q_rd + 3'd1;
                        q_count <= q_count - 4'd1;
                        cq_tail <= cq_tail + 32'd1;
                        if (dma_err) begin
                            ring_fault <= 1'b1;
                            fault_code <= {24'd0, F_RING};
                            cnt_errors <= cnt_errors + 32'd1;
                            bumps = bumps + 8'd1;
                        end
                        q <= Q_IDLE;
                    end
                end

                Q_FETCH: begin
                    if (dma_rd_valid) begin
                        d[dma_rd_index] <= dma_rd_data;
                        if (dma_rd_index != 4'd15)
                            d_crc <= crc32_word(d_crc, dma_rd_data);
                    end
                    if (dma_done) begin
                        d_err <= dma_err;
                        sq_head <= sq_head + 32'd1;
                        q <= Q_DESC;
                    end
                end

                Q_DESC: begin
                    q <= Q_IDLE;
`ifdef FABRIC_BREAK_CRC
                    // Broken on purpose (scripts/rtl-mutants): no CRC check.
                    if (d_err) begin
`else
                    if (d_err || ~d_crc != d[15]) begin
`endif
                        // All zero: most likely written but not flushed.
                        if (!d_err && (d[0] | d[1] | d[2] | d[3] | d[4] | d[5] | d[6] | d[7] |
                                       d[8] | d[9] | d[10] | d[11] | d[12] | d[13] | d[14] |
                                       d[15]) == 32'd0) begin
                            push(32'd0, 16'd0, K_DONE, ST_STALE, d_seq, 32'd0, 32'd0, FIN_NONE);
                            fault_code <= {24'd0, F_STALE};
                        end else begin
                            push(32'd0, 16'd0, K_DONE, ST_BAD, d_seq, 32'd0, 32'd0, FIN_NONE);
                            fault_code <= {24'd0, F_BAD_CRC};
                        end
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else if (d[0] != d_seq) begin
                        push(32'd0, 16'd0, K_DONE, ST_STALE, d_seq, 32'd0, 32'd0, FIN_NONE);
                        fault_code <= {24'd0, F_STALE};
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else if (!d_fields_ok) begin
                        push(32'd0, 16'd0, K_DONE, ST_BAD, d_seq, 32'd0, 32'd0, FIN_NONE);
                        fault_code <= {24'd0, F_BAD_CRC};
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else if (c_busy[d_ctx]) begin
                        push(d[2], d[3][15:0], K_DONE, ST_BAD, 32'd0, 32'd0, 32'd0, FIN_NONE);
                        fault_code <= {24'd0, F_BUSY};
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else if (!slot_usable(d_slot[SW-1:0])) begin
                        push(d[2], d[3][15:0], K_DONE, ST_NOT_READY, 32'd0, 32'd0, 32'd0, FIN_NONE);
                        fault_code <= {24'd0, F_NOT_READY};
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else begin
                        // Sampling::from_bits: infinities and NaN as T = 1,
                        // small and negative greedy, else floor(2^(158-E) / M).
                        div_m <= {1'b1, d_temp[22:0]};
                        div_rem <= 25'd0;
                        div_q <= 42'd0;
                        div_i <= 6'd41;
                        div_num <= (d_exp > 8'd158) ? 42'd0 : (42'd1 << (8'd158 - d_exp));
                        d_greedy <= 1'b0;
                        d_inv_t <= 20'd256;
                        if (d_exp == 8'hFF) begin
                            q <= Q_PA;
                        end else if (d_temp[31] || d_temp <= 32'h3A83_126F) begin
                            d_greedy <= 1'b1;
                            q <= Q_PA;
                        end else begin
                            q <= Q_DIV;
                        end
                    end
                end

                Q_DIV: begin
                    // Restoring division, a quotient bit a cycle.
                    if ({div_rem[23:0], div_num[div_i]} >= {1'b0, div_m}) begin
                        div_rem <= {div_rem[23:0], div_num[div_i]} - {1'b0, div_m};
                        div_q[div_i] <= 1'b1;
                    end else begin
                        div_rem <= {div_rem[23:0], div_num[div_i]};
                    end
                    if (div_i == 6'd0)
                        q <= Q_PA;
                    else
                        div_i <= div_i - 6'd1;
                end

                Q_PA: begin
                    if (div_q != 42'd0 || d_exp != 8'hFF)
                        d_inv_t <= (d_exp == 8'hFF) ? 20'd256 : div_q[19:0];
                    if (d[6] >= 32'd2) begin
                        dma_valid <= 1'b1;
                        dma_write <= 1'b0;
                        dma_addr <= d_prompt_last[DAW-1:0] - {{(DAW - 3){1'b0}}, 3'd4};
                        dma_words <= 5'd1;
                        q <= Q_PA_WAIT;
                    end else begin
                        d_a <= EOS;
                        q <= Q_PB;
                    end
                end

                Q_PA_WAIT: begin
                    if (dma_rd_valid)
                        d_a <= dma_rd_data;
                    if (dma_done) begin
                        d_err <= dma_err;
                        q <= Q_PB;
                    end
                end

                Q_PB: begin
                    dma_valid <= 1'b1;
                    dma_write <= 1'b0;
                    dma_addr <= d_prompt_last[DAW-1:0];
                    dma_words <= 5'd1;
                    q <= Q_PB_WAIT;
                end

                Q_PB_WAIT: begin
                    if (dma_rd_valid)
                        c_b[d_ctx] <= dma_rd_data;
                    if (dma_done) begin
                        d_err <= d_err || dma_err;
                        q <= Q_ACCEPT;
                    end
                end

                Q_ACCEPT: begin
                    q <= Q_IDLE;
                    if (d_err) begin
                        // The prompt is not in memory the device can read.
                        push(32'd0, 16'd0, K_DONE, ST_BAD, d_seq, 32'd0, 32'd0, FIN_NONE);
                        fault_code <= {24'd0, F_BAD_CRC};
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else if (!slot_usable(d_slot[SW-1:0])) begin
                        // The slot went away while the prompt was read.
                        push(d[2], d[3][15:0], K_DONE, ST_NOT_READY, 32'd0, 32'd0, 32'd0, FIN_NONE);
                        fault_code <= {24'd0, F_NOT_READY};
                        q_count <= q_count + 4'd1;
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                    end else begin
                        c_busy[d_ctx] <= 1'b1;
                        c_run[d_ctx] <= 1'b0;
                        c_tag[d_ctx] <= d[2];
                        c_a[d_ctx] <= d_a;
                        c_rng[d_ctx] <= {d[13], d[12]};
                        c_greedy[d_ctx] <= d_greedy;
                        c_inv_t[d_ctx] <= d_inv_t;
                        c_produced[d_ctx] <= 16'd0;
                        c_max[d_ctx] <= d[7][15:0];
                        c_stop[d_ctx] <= d[14];
                        c_out[d_ctx] <= d_output_addr[DAW-1:0];
                        c_crc[d_ctx] <= 32'hFFFF_FFFF;
                        c_start_us[d_ctx] <= us_now;
                        c_stream[d_ctx] <= d[1][24];
                        c_order[d_ctx] <= order_next;
                        order_next <= order_next + 32'd1;
                        cnt_submitted <= cnt_submitted + 32'd1;
                    end
                end

                Q_STEP: begin
                    if (slot_req_valid[s_slot] && slot_req_ready[s_slot])
                        slot_req_valid[s_slot] <= 1'b0;
                    slot_rsp_ready[s_slot] <= 1'b1;
                    s_watch <= s_watch + 17'd1;
                    if (slot_rsp_valid[s_slot] && slot_rsp_ready[s_slot]) begin
                        // The answer ends the step, even from a slot that
                        // never took the request: withdraw it too.
                        slot_req_valid[s_slot] <= 1'b0;
                        slot_rsp_ready[s_slot] <= 1'b0;
                        sl_busy_step[s_slot] <= 1'b0;
                        if (slot_rsp_fault[s_slot]) begin
                            finish(s_ctx, ST_FAULT, FIN_NONE, ~c_crc[s_ctx], c_produced[s_ctx]);
                            q_count <= q_count + 4'd1;
                            fault_code <= {24'd0, F_DECODER};
                            bumps = bumps + 8'd1;
                            q <= Q_IDLE;
                        end else begin
                            s_token <= step_token;
                            q <= Q_TOKEN;
                        end
                    end else if (slot_decoupled[s_slot] || s_watch[16] || !c_busy[s_ctx]) begin
                        // The slot was cut off with the step outstanding (or
                        // never answered): the step is lost; so is the request.
                        slot_req_valid[s_slot] <= 1'b0;
                        slot_rsp_ready[s_slot] <= 1'b0;
                        sl_busy_step[s_slot] <= 1'b0;
                        if (c_busy[s_ctx]) begin
                            finish(s_ctx, ST_FAULT, FIN_NONE, ~c_crc[s_ctx], c_produced[s_ctx]);
                            q_count <= q_count + 4'd1;
                        end
                        fault_code <= {24'd0, F_DECODER};
                        cnt_errors <= cnt_errors + 32'd1;
                        bumps = bumps + 8'd1;
                        if (!slot_decoupled[s_slot]) begin
                            sl_state[s_slot] <= SL_ERROR;
                            sl_err[s_slot] <= SE_HUNG;
                        end
                        q <= Q_IDLE;
                    end
                end

                Q_TOKEN: begin
                    dma_valid <= 1'b1;
                    dma_write <= 1'b1;
                    dma_addr <= c_out[s_ctx] + {{(DAW - 18){1'b0}}, c_produced[s_ctx], 2'b00};
                    dma_words <= 5'd1;
                    dma_wdata <= {480'd0, s_token};
                    q <= Q_TOKEN_WAIT;
                end

                Q_TOKEN_WAIT: begin
                    if (dma_done) begin
                        q <= Q_IDLE;
                        if (dma_err) begin
                            finish(s_ctx, ST_FAULT, FIN_NONE, ~c_crc[s_ctx], c_produced[s_ctx]);
                            q_count <= q_count + 4'd1;
                            fault_code <= {24'd0, F_DECODER};
                            bumps = bumps + 8'd1;
                        end else begin
                            c_crc[s_ctx] <= step_crc;
                            c_produced[s_ctx] <= step_produced;
                            c_a[s_ctx] <= c_b[s_ctx];
                            c_b[s_ctx] <= s_token;
                            cnt_tokens <= cnt_tokens + 32'd1;
                            if (s_token == c_stop[s_ctx]) begin
                                finish(s_ctx, ST_OK, FIN_STOP, ~step_crc, step_produced);
                                q_count <= q_count + 4'd1;
                            end else if (step_produced >= c_max[s_ctx]) begin
                                finish(s_ctx, ST_OK, FIN_LENGTH, ~step_crc, step_produced);
                                q_count <= q_count + 4'd1;
                            end else if (c_stream[s_ctx]) begin
                                push(c_tag[s_ctx], {{(16 - CW){1'b0}}, s_ctx}, K_TOKENS, ST_OK,
                                     {16'd0, step_produced}, 32'd0, 32'd0, FIN_NONE);
                                q_count <= q_count + 4'd1;
                            end
                        end
                    end
                end

                default: q <= Q_IDLE;
            endcase

            // A slot's contexts are all ended once none is left.
            for (e = 0; e < SLOTS; e = e + 1)
                if (sl_kill[e] && slot_active[e] == 8'd0 && !(q == Q_IDLE && end_found && !end_cancel))
                    sl_kill[e] <= 1'b0;

            event_seq <= event_seq + {24'd0, bumps};
        end
    end
`ifdef FORMAL
    // ---- formal properties (scripts/formal; Yosys read_verilog -formal) ----
    // The AXI4-Lite slave's rules (fabric_axil's own block) constrain the
    // host's register accesses; the DMA's AXI inputs and the slots' outputs
    // are free: whatever a slot half reprogrammed could drive.
    reg f_past_valid = 1'b0;
    always @(posedge clk)
        f_past_valid <= 1'b1;

    // ---- the host, as section 5 has it (a monitor, not an assumption) ----
    // The host's rules, broken or kept by each register write. Properties
    // that depend on them hold while f_host_ok (every write since reset kept
    // them); the others hold whatever the host writes.
    wire f_running = enabled && control[0];
    wire f_wr_ring = reg_we && reg_waddr >= 12'h028 && reg_waddr <= 12'h03C;
    wire f_wr_enable = reg_we && reg_waddr == 12'h020 && reg_wdata[0] && !control[0];
    wire f_wr_sq_tail = reg_we && reg_waddr == 12'h040;
    wire f_wr_cq_head = reg_we && reg_waddr == 12'h048;
    wire f_host_rules =
        // Initialise: the rings are programmed only once RUNNING reads 0
        // after CONTROL = 0 ...
        (!f_wr_ring || (!control[0] && !enabled)) &&
        // ... and ENABLE is set with SQ_TAIL and CQ_HEAD written to 0.
        (!f_wr_enable || (!enabled && sq_tail == 32'd0 && cq_head == 32'd0)) &&
        // The doorbell and CQ_HEAD are written while stopped, or once
        // RUNNING reads 1 (not while the device is starting or stopping).
        (!(f_wr_sq_tail || f_wr_cq_head) || (!control[0] && !enabled) || f_running) &&
        // Submit: SQ_TAIL only moves forward, never more than SQ_ENTRIES
        // ahead of SQ_HEAD (the host counts free entries from completions,
        // so its SQ_HEAD is at most stale, never ahead).
        (!(f_wr_sq_tail && f_running) ||
         (reg_wdata - sq_head >= sq_tail - sq_head && reg_wdata - sq_head <= sq_entries)) &&
        // Complete: CQ_HEAD only moves forward, never past CQ_TAIL.
        (!(f_wr_cq_head && f_running) || cq_tail - reg_wdata <= cq_tail - cq_head);
    reg f_host_ok = 1'b1;
    always @(posedge clk)
        f_host_ok <= rst || (f_host_ok && f_host_rules);

    reg [4:0] f_q_d;
    always @(posedge clk)
        f_q_d <= rst ? Q_IDLE : q;

    // ---- 2. the ring pointers --------------------------------------------
    always @(posedge clk)
        if (f_past_valid && !$past(rst)) begin
            // The device reads only descriptors the host made available,
            // whatever the host writes: a descriptor read starts only while
            // SQ_TAIL - SQ_HEAD (free-running, unsigned) is 1..SQ_ENTRIES.
            if (q == Q_FETCH && f_q_d == Q_IDLE)
                a_sq_reads_only_submitted: assert($past(sq_tail - sq_head) != 32'd0 &&
                                                  $past(sq_tail - sq_head) <= $past(sq_entries));
            // SQ_HEAD moves only by one at the end of a descriptor read, or
            // to 0 as ENABLE rises.
            if (sq_head != $past(sq_head))
                a_sq_head_steps: assert((f_q_d == Q_FETCH && $past(dma_done) &&
                                         sq_head == $past(sq_head) + 32'd1) ||
                                        (f_q_d == Q_IDLE && sq_head == 32'd0));
            // A completion entry is posted only into a free ring entry:
            // CQ_TAIL - CQ_HEAD below CQ_ENTRIES as the write starts.
            if (q == Q_POST && f_q_d == Q_IDLE)
                a_cq_posts_only_with_room: assert($past(cq_tail - cq_head) < $past(cq_entries));
            // CQ_TAIL moves only by one at the end of a post, or to 0 as
            // ENABLE rises.
            if (cq_tail != $past(cq_tail))
                a_cq_tail_steps: assert((f_q_d == Q_POST && $past(dma_done) &&
                                         cq_tail == $past(cq_tail) + 32'd1) ||
                                        (f_q_d == Q_IDLE && cq_tail == 32'd0));
        end

    always @(*)
        if (f_past_valid && !rst && f_host_ok && enabled) begin
            // SQ_HEAD never passes SQ_TAIL: SQ_TAIL - SQ_HEAD stays in
            // 0..SQ_ENTRIES while running.
            a_sq_head_behind_tail: assert(sq_tail - sq_head <= sq_entries);
            // CQ_TAIL never runs more than CQ_ENTRIES ahead of CQ_HEAD.
            a_cq_tail_within_entries: assert(cq_tail - cq_head <= cq_entries);
        end

    // How the sequencer holds those bounds (helpers for k-induction): it
    // works only while running, and a descriptor read or a completion post
    // under way keeps the room it started with.
    always @(*)
        if (f_past_valid && !rst) begin
            h_q_valid: assert(q <= Q_TOKEN_WAIT);
            h_works_only_running: assert(q == Q_IDLE || enabled);
            h_running_seen: assert(!enabled || control_seen[0]);
            if (f_host_ok && q == Q_FETCH)
                h_fetch_keeps_room: assert(sq_tail - sq_head != 32'd0 &&
                                           sq_tail - sq_head <= sq_entries);
            if (f_host_ok && q == Q_POST)
                h_post_keeps_room: assert(cq_tail - cq_head < cq_entries);
            if (f_host_ok && control[0] && !control_seen[0] && !enabled)
                h_enable_from_zero: assert(sq_tail == 32'd0 && cq_head == 32'd0);
        end

    // ---- 3. the interrupt ----------------------------------------------------
    // irq is registered: it is, one cycle later, exactly the contract's
    // equation ENABLED && IRQ_ENABLE && (CQ_TAIL != CQ_HEAD || EVENT_SEQ !=
    // EVENT_ACK), and low out of reset.
    always @(posedge clk)
        if (f_past_valid)
            a_irq_equation: assert(irq == (!$past(rst) && $past(enabled && control[1] &&
                                   (cq_tail != cq_head || event_seq != event_ack))));

    // ---- 4. SLOT_SHUTDOWN ------------------------------------------------------
    // Per slot: SLOT_SHUTDOWN reads 0x0F now (f_shut), and did last cycle.
    reg [SLOTS-1:0] f_shut, f_shut_d, f_idle;
    integer f_s;
    always @(*)
        for (f_s = 0; f_s < SLOTS; f_s = f_s + 1) begin
            f_shut[f_s] = shutdown_bits(f_s) == 32'h0F;
            // Nothing outstanding on the slot's channels: no step in
            // flight, no request offered, no answer awaited.
            f_idle[f_s] = !sl_busy_step[f_s] && !slot_req_valid[f_s] && !slot_rsp_ready[f_s] &&
                          !(q == Q_STEP && s_slot == f_s);
        end
    always @(posedge clk)
        f_shut_d <= f_shut;

    always @(*)
        if (f_past_valid && !rst)
            // SLOT_SHUTDOWN == 0x0F implies nothing outstanding on the slot.
            a_shutdown_means_idle: assert((f_shut & ~f_idle) == {SLOTS{1'b0}});
    // A step is outstanding to slot s exactly while the sequencer waits
    // for s in Q_STEP; the request and the answer's READY only then
    // (helpers for k-induction).
    reg [SLOTS-1:0] f_in_step;
    always @(*)
        for (f_s = 0; f_s < SLOTS; f_s = f_s + 1)
            f_in_step[f_s] = q == Q_STEP && s_slot == f_s;
    always @(*)
        if (f_past_valid && !rst) begin
            h_busy_is_step: assert(sl_busy_step == f_in_step);
            h_req_only_busy: assert((slot_req_valid & ~sl_busy_step) == {SLOTS{1'b0}});
            h_rsp_only_busy: assert((slot_rsp_ready & ~sl_busy_step) == {SLOTS{1'b0}});
        end

    always @(posedge clk)
        if (f_past_valid && !$past(rst))
            // Once it reads 0x0F it stays so while QUIESCE stays set: the
            // shell starts no work in a quiesced slot.
            a_shutdown_holds: assert((f_shut_d & quiesce & ~f_shut) == {SLOTS{1'b0}});
    // ---- reachability: the checks above are not vacuous ---------------------
    // scripts/formal asks ABC's bounded model checker for a trace from reset
    // to each reach point, under the same assumptions: were they
    // contradictory, or the states out of reach, the proofs above would hold
    // of nothing.
    reg f_after_reset = 1'b0;
    always @(posedge clk)
        f_after_reset <= f_past_valid && !rst;
    // A decode step answered by its slot.
    wire f_reach_step = f_after_reset && !rst && f_q_d == Q_STEP && q == Q_TOKEN;
    // A completion entry posted after a step was answered, and the
    // interrupt it raises.
    reg f_stepped = 1'b0;
    always @(posedge clk)
        f_stepped <= !rst && (f_stepped || f_reach_step);
    (* keep *) wire f_reach_post = f_after_reset && !rst && f_stepped && enabled &&
                                   cq_tail != 32'd0 && irq;
    // A quiesced slot reading 0x0F after a step was answered.
    (* keep *) wire f_reach_shutdown = f_after_reset && !rst && f_stepped &&
                                       f_shut != {SLOTS{1'b0}};
    // The same, negated: what the search asserts, so that a trace to it is a
    // counterexample.
    (* keep *) wire f_unreached_post = !f_reach_post;
    (* keep *) wire f_unreached_shutdown = !f_reach_shutdown;
`endif
endmodule

`default_nettype wire
