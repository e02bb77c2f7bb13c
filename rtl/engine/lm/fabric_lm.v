// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm: the transformer engine (contract section 10; engine kind 2,
// version 1; weights FLM1). Its weights lie in DDR, committed as a table
// is (section 7); each context's keys and values lie in DDR after them,
// in the slot's region. firmware/fabric-model's `lm` module is the same
// computation, integer for integer; the co-simulation checks they agree
// token for token.
//
// A commit reads the weights once: the header (the shape, checked against
// the engine's limits and the region, which must also hold LANES
// contexts' keys and values), then every word, for the CRC-32 the slot
// reports, keeping the small tables on chip (the rotary table, the GELU
// table, every norm's gains). A step reads only the matrices and the keys
// and values.
//
// Steps are batched. A request names its lane (its context in the slot);
// a round takes every lane with a request waiting and feeds each one
// token (end-of-text at a sequence's start, then the prompt's tokens read
// from DDR, then the token drawn last), so that each matrix is read once
// a round for every lane (fabric_lm_mv). Lanes whose prompt is all fed
// also get the logits, and are answered with a token drawn by section 8;
// the others go on in the next round. The vector work of a round (norms,
// rotations, quantizations, GELU) runs a lane at a time through one
// pipeline (a lane's vector memory in, an element a cycle); the
// attention a lane and a head at a time, from the lane's own keys and
// values only.
//
// A bus error on any read or write, of the weights or of the keys and
// values, ends every request of the round as a table read fault (fault
// 2) and takes the table away until the next commit.

`default_nettype none

module fabric_lm #(
    parameter integer DAW = 40,
    parameter integer DW = 64,           // the HP port's width
    parameter integer MAX_BURST = 16,
    // Bursts in flight: an HP port's AFI accepts eight read commands and
    // buffers 128 beats (UG1085, "AXI Interface Programming"), eight
    // bursts of 16; four left half the port idle at 128 cycles of DDR
    // latency (results/rtl-lm-speed-2026-12-06.md).
    parameter integer MAX_OUT = 8,
    // Contexts a round serves: the round's vector and attention work is a
    // lane's at a time, so each lane adds to the round while the weights
    // are read once; eight make a full batch about 5x a lone context's
    // tokens (four could not reach the 4x issue 31 asks).
    parameter integer LANES = 8,
    parameter integer MAX_D = 256,
    parameter integer MAX_F = 1024,
    parameter integer MAX_V = 4608,
    parameter integer MAX_C = 256,
    parameter integer MAX_L = 8,
    parameter integer MAX_HD = 64,
    // Derived from the parameters above: leave them be.
    parameter integer LW = (LANES > 1) ? $clog2(LANES) : 1,
    parameter integer BPB = DW / 8,
    parameter integer WPB = DW / 32
) (
    input  wire             clk,
    input  wire             rst,

    input  wire             tbl_start,
    input  wire [DAW-1:0]   tbl_base,
    input  wire [31:0]      tbl_region,
    output reg              tbl_done,
    output reg  [1:0]       tbl_result,    // 0: taken, 1: not weights this engine runs, 2: a read failed
    output reg  [31:0]      tbl_crc,
    output reg  [255:0]     identity,
    output wire             reading,

    input  wire             req_valid,
    output wire             req_ready,
    input  wire [LW-1:0]    req_lane,
    input  wire             req_first,     // a new sequence: its prompt at req_prompt
    input  wire [DAW-1:0]   req_prompt,
    input  wire [15:0]      req_len,
    input  wire [31:0]      req_draw,
    input  wire             req_greedy,
    input  wire [19:0]      req_inv_t,

    output reg              rsp_valid,
    input  wire             rsp_ready,
    output reg  [LW-1:0]    rsp_lane,
    output reg  [31:0]      rsp_token,
    output reg  [2:0]       rsp_fault,     // 0 a token, 1 no table, 2 a read failed, 3 context full, 4 a token outside the vocabulary

    output wire [DAW-1:0]   m_araddr,
    output wire [7:0]       m_arlen,
    output wire [2:0]       m_arsize,
    output wire [1:0]       m_arburst,
    output wire             m_arvalid,
    input  wire             m_arready,
    input  wire [DW-1:0]    m_rdata,
    input  wire [1:0]       m_rresp,
    input  wire             m_rlast,
    input  wire             m_rvalid,
    output wire             m_rready,

    output wire [DAW-1:0]   m_awaddr,
    output wire [7:0]       m_awlen,
    output wire [2:0]       m_awsize,
    output wire [1:0]       m_awburst,
    output wire             m_awvalid,
    input  wire             m_awready,
    output wire [DW-1:0]    m_wdata,
    output wire [DW/8-1:0]  m_wstrb,
    output wire             m_wlast,
    output wire             m_wvalid,
    input  wire             m_wready,
    input  wire [1:0]       m_bresp,
    input  wire             m_bvalid,
    output wire             m_bready
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_lm_kv;
    initial break_lm_kv = $test$plusargs("fabric_break_lm_kv") != 0;
    reg break_lm_rope;
    initial break_lm_rope = $test$plusargs("fabric_break_lm_rope") != 0;
`endif

`include "fabric_crc32.vh"
`include "fabric_exp2.vh"

    localparam [31:0] MAGIC = 32'h464C_4D31;       // "FLM1"
    localparam [31:0] ENGINE = {16'd1, 16'd2};     // version 1, kind 2: the transformer
    localparam [15:0] EOS = 16'd256;
    localparam [1:0]  R_OK = 2'd0, R_BAD = 2'd1, R_READ = 2'd2;
    localparam [2:0]  F_NONE = 3'd0, F_NO_TABLE = 3'd1, F_READ = 3'd2, F_FULL = 3'd3, F_TOKEN = 3'd4;
    // A lane's vector memory: the residual, q, k, v, the attention's
    // output, a norm's output, the MLP's hidden layer, the logits.
    localparam integer O_X = 0, O_Q = MAX_D, O_K = 2 * MAX_D, O_V = 3 * MAX_D, O_O = 4 * MAX_D,
                       O_T = 5 * MAX_D, O_H = 6 * MAX_D, O_LOG = 6 * MAX_D + MAX_F;
    localparam integer VSA = $clog2(O_LOG + MAX_V);
    localparam integer VS = 1 << VSA;
    localparam integer VA = LW + VSA;
    localparam integer QD = MAX_F / BPB;
    localparam integer QA = $clog2(QD);
    localparam integer GS = (2 * MAX_L + 1) * MAX_D;
    localparam integer GA = $clog2(GS);
    localparam integer RS = MAX_C * MAX_HD / 2;
    localparam integer RA = $clog2(RS);
    localparam integer SA = $clog2(MAX_V + 1);
    localparam integer HA = $clog2(MAX_HD);
    localparam integer CA = $clog2(MAX_C);
    localparam [VSA-1:0] A_X = O_X[VSA-1:0], A_Q = O_Q[VSA-1:0], A_K = O_K[VSA-1:0],
                         A_V = O_V[VSA-1:0], A_O = O_O[VSA-1:0], A_T = O_T[VSA-1:0],
                         A_H = O_H[VSA-1:0], A_LOG = O_LOG[VSA-1:0];

    // ---- the read stream, shared by the sequencer and the products ---------
    reg            t_cmd_valid;
    reg  [DAW-1:0] t_cmd_addr;
    reg  [23:0]    t_cmd_words;
    wire           mv_cmd_valid;
    wire [DAW-1:0] mv_cmd_addr;
    wire [23:0]    mv_cmd_words;
    wire           mv_s_ready, t_s_ready;
    reg            mv_own;               // a product is under way
    wire           s_valid, s_last_unused, s_err, s_idle, cmd_ready;
    wire [DW-1:0]  s_data;
    wire           s_ready = mv_own ? mv_s_ready : t_s_ready;

    fabric_lm_stream #(.AW(DAW), .DW(DW), .MAX_BURST(MAX_BURST), .MAX_OUT(MAX_OUT)) rd (
        .clk(clk), .rst(rst),
        .cmd_valid(mv_own ? mv_cmd_valid : t_cmd_valid), .cmd_ready(cmd_ready),
        .cmd_addr(mv_own ? mv_cmd_addr : t_cmd_addr),
        .cmd_words(mv_own ? mv_cmd_words : t_cmd_words),
        .s_valid(s_valid), .s_ready(s_ready), .s_data(s_data), .s_last(s_last_unused),
        .s_err(s_err), .idle(s_idle),
        .m_araddr(m_araddr), .m_arlen(m_arlen), .m_arsize(m_arsize), .m_arburst(m_arburst),
        .m_arvalid(m_arvalid), .m_arready(m_arready), .m_rdata(m_rdata), .m_rresp(m_rresp),
        .m_rlast(m_rlast), .m_rvalid(m_rvalid), .m_rready(m_rready)
    );

    // ---- the write master: keys and values ---------------------------------
    reg            w_valid;
    reg  [DAW-1:0] w_addr;
    reg  [31:0]    w_data;
    reg            w_clear;
    wire           w_ready, w_idle, w_err;

    fabric_lm_wr #(.AW(DAW), .DW(DW)) wr (
        .clk(clk), .rst(rst),
        .w_valid(w_valid), .w_ready(w_ready), .w_addr(w_addr), .w_data(w_data),
        .clear(w_clear), .idle(w_idle), .err(w_err),
        .m_awaddr(m_awaddr), .m_awlen(m_awlen), .m_awsize(m_awsize), .m_awburst(m_awburst),
        .m_awvalid(m_awvalid), .m_awready(m_awready), .m_wdata(m_wdata), .m_wstrb(m_wstrb),
        .m_wlast(m_wlast), .m_wvalid(m_wvalid), .m_wready(m_wready), .m_bresp(m_bresp),
        .m_bvalid(m_bvalid), .m_bready(m_bready)
    );
    assign reading = !s_idle || !w_idle || t_cmd_valid || w_valid;

    // ---- the sequencer's words: a beat's words one or two at a time -------
    // The attention's keys and values are taken two words a cycle (a 64-bit
    // beat: `uw_pair`) where a head's words are even, so that reading back
    // a context runs at the port's rate; everything else a word a cycle.
    reg  [DW-1:0] ub;
    reg  [7:0]    ub_n;                  // words of ub not yet taken
    reg  [23:0]   uw_need;               // words of the command not yet in ub
    wire          uw_valid = ub_n != 8'd0;
    wire [31:0]   uw_data = ub[31:0];
    wire [31:0]   uw_data2 = ub[63:32];
    wire          uw_pair;
    wire [7:0]    uw_step = uw_pair ? 8'd2 : 8'd1;
    wire          uw_take;
    wire          uw_word = uw_valid && uw_take;
    assign t_s_ready = !mv_own && uw_need != 24'd0 &&
                       (ub_n == 8'd0 || (ub_n == uw_step && uw_take));
    wire [23:0]   uw_load = (uw_need < WPB[23:0]) ? uw_need : WPB[23:0];

    // ---- the vector pipeline's pass (declared here: the memories' read
    // addresses come from it) -------------------------------------------------
    localparam [2:0] OP_MAX = 3'd0, OP_SS = 3'd1, OP_RMS = 3'd2, OP_ZERO = 3'd3, OP_QNT = 3'd4,
                     OP_GELU = 3'd5, OP_ROT = 3'd6, OP_W = 3'd7;
    localparam [1:0] QT_QMEM = 2'd0, QT_KV = 2'd1, QT_QH = 2'd2;
    reg [2:0]     p_op;
    reg [31:0]    vm_q;
    reg [VSA-1:0] p_src, p_dst;
    reg [15:0]    p_n, p_mi;
    reg [GA-1:0]  p_goff;
    reg [1:0]     p_qdst;
    reg           p_walk, p_found;
    reg [15:0]    rpos;                  // the lane's position, for the rotation
    reg [LW-1:0]  ln;                    // the lane
    reg [7:0]     hd;                    // a head's width
    reg [2:0]     hsh;                   // log2 of hd
    wire          p_issue;
    wire [VA-1:0]  t_raddr = {ln, p_src + p_mi[VSA-1:0]};
    wire [GA-1:0]  g_ra = p_goff + p_mi[GA-1:0];
    wire [15:0]    pair = (p_mi & ({8'd0, hd} - 16'd1)) >> 1;
    wire [31:0]    r_word = ({16'd0, rpos} << (hsh - 3'd1)) + {16'd0, pair};
    wire [RA-1:0]  r_ra = r_word[RA-1:0];
    wire [31-RA:0] unused_r_word = r_word[31:RA];
    // GELU's table index from the element as it arrives (stage 1).
    wire signed [33:0] g_shift = ($signed({{2{vm_q[31]}}, vm_q}) + 34'sd524288) >>> 9;
    wire [10:0]    g_idx = (g_shift < 34'sd0) ? 11'd0 : (g_shift > 34'sd2047) ? 11'd2047 : g_shift[10:0];
    wire [9:0]     ph_ra = g_idx[10:1];

    // ---- memories ----------------------------------------------------------
    // Each lane's vectors (Q16 words, at O_*): a read
    // port, its word the cycle after, and a write port.
    reg  [31:0]   vmem [0:LANES*VS-1];
    wire [VA-1:0] mv_raddr, mv_waddr;
    wire          mv_we;
    wire [31:0]   mv_wdata;
    reg           t_we;
    reg  [VA-1:0] t_waddr;
    reg  [31:0]   t_wdata;
    always @(posedge clk) begin
        vm_q <= vmem[mv_own ? mv_raddr : t_raddr];
        if (mv_own ? mv_we : t_we)
            vmem[mv_own ? mv_waddr : t_waddr] <= mv_own ? mv_wdata : t_wdata;
    end

    // Each lane's quantized input to a product, a column group a word.
    reg  [LANES*DW-1:0] qmem [0:QD-1];
    reg  [LANES*DW-1:0] qm_q;
    wire [QA-1:0]       mv_qaddr;
    always @(posedge clk)
        qm_q <= qmem[mv_qaddr];

    // The small tables, kept at the commit.
    reg  [31:0]   gmem [0:GS-1];         // gains: block 2l norm 1, 2l+1 norm 2, 2L the final
    reg  [31:0]   rmem [0:RS-1];         // the rotary table
    reg  [31:0]   phimem [0:1023];       // Φ, two a word
    reg  [31:0]   gm_q, rm_q, ph_q;
    always @(posedge clk) begin
        gm_q <= gmem[g_ra];
        rm_q <= rmem[r_ra];
        ph_q <= phimem[ph_ra];
    end

    // The attention's buffers for one head: keys' and values' maxima,
    // scores, weights, the query, and the values' sums.
    reg  [31:0]        kmbuf [0:MAX_C-1];
    reg  [31:0]        vmbuf [0:MAX_C-1];
    reg  signed [47:0] zbuf [0:MAX_C-1];
    reg  [16:0]        wbuf [0:MAX_C-1];
    reg  signed [7:0]  qh [0:MAX_HD-1];
    reg  signed [7:0]  kvbuf [0:MAX_HD-1];
    reg  signed [71:0] accv [0:MAX_HD-1];

    // ---- the table's shape and where everything is ------------------------
    reg [DAW-1:0] base;
    reg [31:0]    region;
    reg           table_ok;
    reg [31:0]    crc;
    reg [31:0]    h [0:7];
    reg [3:0]     hi;
    reg [31:0]    words;
    reg [15:0]    nv, nd, nf, nc;        // vocabulary, width, hidden, context
    reg [7:0]     nl, nh;                // layers, heads
    reg [31:0]    rope_w, mat_dd, mat_fd, mat_df, mat_e, inc_a, inc_b, layer_w, l0;
    reg [31:0]    head_kv;               // bytes of a head's keys and values, a layer
    reg [31:0]    lane_kv;               // bytes of a lane's
    reg [63:0]    layer_kv;              // bytes of a layer's heads, a lane
    reg [31:0]    nl_w;                  // the layers' words
    reg [DAW-1:0] kv_base;

    // The shape's few products, once a commit, by shift and add (a bit of
    // the multiplier a cycle): no DSP slice is spent on them.
    reg           hm_busy;
    reg  [63:0]   hm_p, hm_a;
    reg  [31:0]   hm_b;
    reg  [2:0]    hm_step;
    task hmul(input [31:0] a, input [31:0] b);
        begin
            hm_p <= 64'd0;
            hm_a <= {32'd0, a};
            hm_b <= b;
            hm_busy <= 1'b1;
        end
    endtask

    // ---- the lanes ---------------------------------------------------------
    reg [LANES-1:0] pend, first;
    reg [DAW-1:0]   l_prompt [0:LANES-1];
    reg [15:0]      l_len [0:LANES-1];
    reg [15:0]      l_fed [0:LANES-1];   // prompt tokens fed
    reg [15:0]      l_pos [0:LANES-1];   // positions fed
    reg [15:0]      l_last [0:LANES-1];  // the token drawn last
    reg [31:0]      l_draw [0:LANES-1];
    reg             l_greedy [0:LANES-1];
    reg [19:0]      l_inv_t [0:LANES-1];
    reg [15:0]      l_tok [0:LANES-1];   // the token this round feeds
    reg [31:0]      l_m [0:LANES-1];     // the lane's quantized input's max
    reg [LANES-1:0] rmask, fmask, dmask; // the round's lanes; those fed; those drawing

    localparam [5:0]
        S_IDLE = 6'd0, S_HDR = 6'd1, S_CHECK = 6'd2, S_SHAPE = 6'd3, S_SHAPE2 = 6'd4,
        S_SHAPE3 = 6'd5, S_BODY = 6'd6, S_NOTAB = 6'd7, S_PREP = 6'd8, S_TOKW = 6'd9,
        S_FEED = 6'd10, S_EMB_S = 6'd11, S_EMB_W = 6'd12, S_LOOP = 6'd13, S_AFTER = 6'd14,
        S_MVW = 6'd15, S_RMS1 = 6'd17, S_RMS2 = 6'd18, S_SQRT = 6'd19,
        S_RMS3 = 6'd20, S_RMS4 = 6'd21, S_QNT = 6'd22, S_QNT1 = 6'd23, S_QNT2 = 6'd24,
        S_QNT3 = 6'd25, S_PASS = 6'd26, S_DIV = 6'd27, S_ROT = 6'd28, S_HEAD = 6'd29,
        S_KVW = 6'd30, S_KVW2 = 6'd31, S_AWAIT = 6'd32, S_KEYS = 6'd34,
        S_WTS = 6'd35, S_WTS2 = 6'd36, S_VALS = 6'd38, S_OUT = 6'd39,
        S_PICK = 6'd40, S_PICK2 = 6'd41, S_PICK3 = 6'd42, S_RSP = 6'd43, S_FAIL = 6'd44,
        S_END = 6'd45, S_GELU = 6'd46, S_HEAD2 = 6'd47, S_HEAD3 = 6'd48;

    reg [5:0] state, rret, pret, dret, sret;
    reg [2:0] ph;                        // the round's phase
    reg [7:0] li;                        // the layer
    reg [31:0] lw;                       // the layer's first word
    reg [1:0] mvk;                       // which of q, k, v
    reg [LW:0]   lnx;                    // the next lane to look at
    reg          err;                    // a read of this commit or round failed

    // ---- helpers -----------------------------------------------------------
    function [5:0] bitlen(input [31:0] v);
        integer k;
        begin
            bitlen = 6'd0;
            for (k = 0; k < 32; k = k + 1)
                if (v[k])
                    bitlen = k[5:0] + 6'd1;
        end
    endfunction

    function signed [31:0] sat(input signed [127:0] v);
        sat = (v > 128'sh7FFF_FFFF) ? 32'sh7FFF_FFFF :
              (v < -128'sh8000_0000) ? -32'sh8000_0000 : v[31:0];
    endfunction

    // round_shift (contract section 10): v / 2^n, rounded half up.
    function signed [127:0] rsh(input signed [127:0] v, input [6:0] n);
        rsh = (v + (128'sd1 <<< (n - 7'd1))) >>> n;
    endfunction

    // Where token t's row scale lies.
    function [31:0] mat_e_at(input [15:0] t);
        mat_e_at = l0 - mat_e + {16'd0, t};
    endfunction

    // The lowest lane of the loop's mask at or above lnx.
    reg          nx_found;
    reg [LW-1:0] nx_lane;
    reg [LANES-1:0] loop_mask;
    integer      nk;
    always @(*) begin
        loop_mask = (state == S_PREP) ? rmask :
                    (state == S_NOTAB) ? pend :
                    (state == S_FAIL) ? (fmask & pend) :
                    (ph == P_FN || ph == P_PICK) ? dmask : fmask;
        nx_found = 1'b0;
        nx_lane = {LW{1'b0}};
        for (nk = LANES - 1; nk >= 0; nk = nk - 1)
            if (loop_mask[nk] && nk >= {{(31 - LW){1'b0}}, lnx})
                begin
                    nx_found = 1'b1;
                    nx_lane = nk[LW-1:0];
                end
    end

    // ---- the divider, and the square root ---------------------------------
    reg         div_start;
    reg  [63:0] div_num;
    reg  [31:0] div_den;
    wire        div_done;
    wire [63:0] div_q;
    wire [14:0] unused_div_hi = div_q[63:49];
    fabric_lm_div divider (
        .clk(clk), .rst(rst), .start(div_start), .num(div_num), .den(div_den),
        .done(div_done), .q(div_q)
    );
    reg [47:0] sq_v, sq_res, sq_bit;

    // ---- the products -------------------------------------------------------
    reg               mv_start;
    reg  [DAW-1:0]    mv_addr;
    reg  [SA-1:0]     mv_rows;
    reg  [15:0]       mv_cols;
    reg  [1:0]        mv_mode;
    reg  [VSA-1:0]    mv_dst;
    reg  [LANES-1:0]  mv_mask;
    wire              mv_done;
    wire [LANES*32-1:0] mv_best;
    wire [LANES*SA-1:0] mv_best_row;
    wire [LANES*32-1:0] mv_m;
    genvar gl;
    generate
        for (gl = 0; gl < LANES; gl = gl + 1) begin : lane_m
            assign mv_m[32*gl +: 32] = l_m[gl];
        end
    endgenerate

    fabric_lm_mv #(
        .AW(DAW), .DW(DW), .LANES(LANES), .QA(QA), .SA(SA), .VA(VA), .VSA(VSA)
    ) mv (
        .clk(clk), .rst(rst),
        .start(mv_start), .addr(mv_addr), .rows(mv_rows), .cols(mv_cols), .mode(mv_mode),
        .dst(mv_dst), .mask(mv_mask), .m(mv_m), .done(mv_done), .best(mv_best),
        .best_row(mv_best_row),
        .cmd_valid(mv_cmd_valid), .cmd_ready(cmd_ready), .cmd_addr(mv_cmd_addr),
        .cmd_words(mv_cmd_words), .s_valid(s_valid), .s_ready(mv_s_ready), .s_data(s_data),
        .q_addr(mv_qaddr), .q_data(qm_q),
        .v_raddr(mv_raddr), .v_rdata(vm_q), .v_we(mv_we), .v_waddr(mv_waddr), .v_wdata(mv_wdata)
    );

    // ---- the pick ------------------------------------------------------------
    reg  [31:0] ptop;
    reg  [19:0] pinv;
    reg  [33:0] ptotal, px;
    reg  [15:0] pbest, pfound_i;
    wire [67:0] pdraw = ({36'd0, l_draw[ln]} * {34'd0, ptotal}) >> 32;

    // ---- the vector pipeline: an element a cycle, four stages ----------------
    reg               s1_v, s2_v, s3_v, s4_v;
    reg  [15:0]       s1_i, s2_i, s3_i, s4_i;
    reg  [31:0]       mx;                // the largest magnitude (OP_MAX)
    // A pass whose output a quantization takes next (a norm's, GELU's)
    // keeps its largest magnitude in mx as it writes (trk); the attention
    // keeps each lane's output's in l_om (t_o: S_OUT's writes), and the
    // embedding and the products into the residual each lane's residual's
    // in l_xm (t_x: S_EMB_W's writes). The quantization or norm after
    // them needs no OP_MAX pass to find it.
    reg               trk, t_o, t_x;
    reg  [31:0]       l_om [0:LANES-1];
    reg  [31:0]       l_xm [0:LANES-1];
    function [31:0] mag(input [31:0] v);
        mag = v[31] ? -v : v;
    endfunction
    reg  [4:0]        sh;                // a norm's shift
    reg  [47:0]       ss;                // a norm's sum of squares
    reg  [46:0]       inv_r;             // a norm's reciprocal
    reg  [47:0]       rq;                // a quantization's reciprocal
    reg  signed [31:0] rot_a;
    reg  signed [15:0] s2_xs;
    reg  signed [31:0] s2_g, s2_x;
    reg  [31:0]       s2_ax;
    reg               s2_neg, s2_hs, s3_neg;
    reg  signed [48:0] s2_pa, s2_pb;
    reg  signed [32:0] s2_diff;
    reg  signed [47:0] s3_p;
    reg  signed [48:0] s3_pg;
    reg  [79:0]       s3_pr;
    reg  signed [31:0] s3_ra, s3_rb;
    reg  [49:0]       s3_prod;
    reg  signed [94:0] s4_p;
    reg  signed [7:0] s4_q;
    reg  signed [31:0] s4_y;
    reg  [15:0]       s4_below;
    assign p_issue = state == S_PASS && p_mi < p_n && !p_found;
    wire pass_idle = !p_issue && !s1_v && !s2_v && !s3_v && !s4_v;
    // Stage 4's softmax weight of a logit (OP_W; fabric_hw::sampling::weight).
    wire [35:0] w_d = ({20'd0, s4_below} * {16'd0, pinv}) >> 8;
    wire [24:0] w_whole = w_d[35:11];
    wire [2:0]  unused_w_d = w_d[2:0];
    wire [16:0] w_w = (w_whole >= 25'd17) ? 17'd0 : exp2_q16(w_d[10:3]) >> w_whole[4:0];
    wire [79:0] s3_qr = (s3_pr + (80'd1 << 39)) >> 40;
    wire signed [31:0] xs32 = $signed(vm_q) >>> sh;
    wire [5:0]  mx_bits = bitlen(mx);
    wire [15:0] unused_xs32 = xs32[31:16];
    wire signed [31:0] xs_sq = s2_xs * s2_xs;
    // Stage 3's product: a pass does one op, so its norm (x times the
    // gain), GELU (x times the table's slope), quantization (|x| times the
    // reciprocal) and softmax weight (the logit's distance times log2(e))
    // share one signed 34 x 49 multiplier.
    wire signed [33:0] s3_ma = (p_op == OP_RMS) ? {{18{s2_xs[15]}}, s2_xs} :
                               (p_op == OP_GELU) ? {{2{s2_x[31]}}, s2_x} :
                               (p_op == OP_QNT) ? {2'd0, s2_ax} : {1'b0, s2_diff[32:0]};
    wire signed [48:0] s3_mb = (p_op == OP_RMS) ? {{17{s2_g[31]}}, s2_g} :
                               (p_op == OP_GELU) ? {33'd0, s2_hs ? ph_q[31:16] : ph_q[15:0]} :
                               (p_op == OP_QNT) ? {1'b0, rq} : 49'sd94548;
    wire signed [82:0] s3_m = s3_ma * s3_mb;
    wire [2:0]  unused_s3_m = s3_m[82:80];
    wire [49:0] s3_bel = (s3_prod + 50'd1048576) >> 21;
    wire [7:0]  s3_q = (s3_qr > 80'd127) ? 8'd127 : s3_qr[7:0];


    // ---- the attention ------------------------------------------------------
    reg  [7:0]  hh;                      // the head
    reg         kv_sel;                  // 0 keys, 1 values
    reg  [7:0]  kvj;
    reg  [31:0] kvmax, mq;
    reg  [15:0] pp;                      // a position
    // The keys' maxima come in while the query is quantized: km_on until
    // kp, the position they fill, passes the last.
    reg         km_on;
    reg  [15:0] kp;
    reg  [7:0]  wj;                      // a word of the position's head
    reg  signed [31:0] acck;
    reg         sc1_v, sc2_v, sc3_v, sc4_v;
    reg  [15:0] sc1_pp, sc2_pp, sc3_pp, sc4_pp;
    reg  signed [47:0] sc4_z;
    reg  signed [31:0] sc1_acc;
    reg  signed [63:0] sc2_t;
    reg  signed [95:0] sc3_t;
    reg  signed [47:0] ztop;
    reg  [31:0] wtot;
    reg  [48:0] ainv;
    reg  [7:0]  oe;
    wire [15:0] pos = l_pos[ln];
    // Where lane ln's keys and values of layer li, head hh lie.
    // The layer's and the head's offsets are kept beside li and hh (l_off
    // = layer_kv * li, h_off = head_kv * hh), and the lane's is a sum of
    // shifts: address arithmetic spends no DSP slice.
    reg  [63:0] l_off, h_off;
    function [63:0] times_lane(input [31:0] kv, input [LW-1:0] n);
        integer b;
        begin
            times_lane = 64'd0;
            for (b = 0; b < LW; b = b + 1)
                if (n[b])
                    times_lane = times_lane + ({32'd0, kv} << b);
        end
    endfunction
    wire [63:0] hb64 = {{(64 - DAW){1'b0}}, kv_base} + times_lane(lane_kv, ln) + l_off + h_off;
    wire [63:0] ctx_hd = {48'd0, nc} << hsh;
    wire [DAW-1:0] key_at = hb64[DAW-1:0];
    wire [63-DAW:0] unused_at = hb64[63:DAW] ^ ctx_hd[63:DAW];
    wire [DAW-1:0] val_at = key_at + ctx_hd[DAW-1:0];
    wire [DAW-1:0] kmax_at = val_at + ctx_hd[DAW-1:0];
    wire [DAW-1:0] vmax_at = kmax_at + {{(DAW - 18){1'b0}}, nc, 2'b00};
    // Where the attention reads them from: the lane's own, written above.
`ifdef FABRIC_MUTANTS
    // Broken: the next lane's.
    wire [DAW-1:0] rd_off = break_lm_kv ? {{(DAW - 32){1'b0}}, lane_kv} : {DAW{1'b0}};
`else
    wire [DAW-1:0] rd_off = {DAW{1'b0}};
`endif
    wire [7:0]  hw = hd >> 2;            // words a position's head
    // hw is 1, 4 or 16 (a head is 4, 16 or 64 wide). Where it is even a pair
    // never holds two positions' words: the stream starts at position 0, so
    // each position's words start at an even word of it. (A beat has two
    // words at least: DW is 64 or 128.)
    assign uw_pair = (state == S_KEYS || state == S_VALS) && !hw[0];
    wire [15:0] pos1 = pos + 16'd1;
    wire [23:0] head_words = {8'd0, pos1} << (hsh - 3'd2);
    wire [VSA-1:0] hh_hd = {{(VSA - 8){1'b0}}, hh} << hsh;   // the head's first element
    // The key word's dot product with the query's four elements.
    function signed [31:0] dot4(input [31:0] w, input [HA-1:0] at);
        integer b;
        begin
            dot4 = 32'sd0;
            for (b = 0; b < 4; b = b + 1)
                dot4 = dot4 + $signed(w[8*b +: 8]) * qh[at + b[HA-1:0]];
        end
    endfunction
    // In pairs (wj even) the second word holds the next four elements.
    wire signed [31:0] k_dot = dot4(uw_data, {wj[HA-3:0], 2'b00}) +
                               (uw_pair ? dot4(uw_data2, {wj[HA-3:1], 3'b100}) : 32'sd0);
    wire signed [48:0] zdiff = $signed({ztop[47], ztop}) - $signed({zbuf[pp[CA-1:0]][47], zbuf[pp[CA-1:0]]});
    wire [40:0]        z_whole = zdiff[48:8];
    wire [16:0]        z_w = (z_whole >= 41'd17) ? 17'd0 : exp2_q16(zdiff[7:0]) >> z_whole[4:0];
    wire [48:0]        v_wv = {32'd0, wbuf[pp[CA-1:0]]} * {17'd0, vmbuf[pp[CA-1:0]]};
    wire signed [127:0] z_full = sc3_t * 128'sd94548;
    wire signed [127:0] z_new = z_full >>> (7'd54 + {5'd0, hsh[2:1]});
    wire [79:0]  unused_z = z_new[127:48];
    // The attention's output a stage at a time: element oe's product,
    // the element before it rounded, the one before that written.
    wire signed [127:0] o_prod = $signed({{56{accv[oe[HA-1:0]][71]}}, accv[oe[HA-1:0]]}) * $signed({79'd0, ainv});
    reg  signed [127:0] o_p, o_r;

    // ---- the embedding -----------------------------------------------------
    reg  [31:0] escale;
    reg  [15:0] ei;
    reg  [1:0]  eb;
    wire signed [7:0]  e_w = uw_data[8*eb +: 8];
    wire signed [40:0] e_p = $signed({{33{e_w[7]}}, e_w}) * $signed({9'd0, escale});
    wire signed [127:0] e_x = rsh($signed({{87{e_p[40]}}, e_p}), 7'd14);

    // ---- the commit's body --------------------------------------------------
    reg  [31:0] wi;                      // the word being read
    reg  [31:0] gstart;                  // the next gains block's first word
    reg  [7:0]  gblk;
    reg  [31:0] phi_off;
    wire [31:0] rope_i = wi - 32'd16;
    wire [31:0] phi_i = wi - phi_off;
    wire [31:0] gain_i = {24'd0, gblk} * MAX_D + (wi - gstart);
    wire [31:0] unused_i = {rope_i[31:RA], phi_i[31:10], gain_i[31:GA]} == 0 ? 32'd0 : 32'd1;

    assign uw_take = (state == S_HDR || state == S_BODY || state == S_TOKW || state == S_EMB_S ||
                      km_on || state == S_KEYS || state == S_WTS || state == S_VALS ||
                      (state == S_EMB_W && eb == 2'd3));
    wire cmt = state == S_HDR || state == S_CHECK || state == S_SHAPE || state == S_SHAPE2 ||
               state == S_SHAPE3 || state == S_BODY;
    assign req_ready = !cmt && !(state == S_IDLE && tbl_start);

    localparam [2:0] P_N1 = 3'd0, P_ATT = 3'd1, P_O1 = 3'd2, P_N2 = 3'd3, P_G = 3'd4,
                     P_FN = 3'd5, P_PICK = 3'd6;

    // The answer a state asks for, given when the answer register is free.
    reg [LW-1:0] a_lane;
    reg [15:0]   a_tok;
    reg [2:0]    a_fault;

    task answer(input [LW-1:0] lane, input [15:0] tok, input [2:0] fault, input [5:0] next);
        begin
            a_lane <= lane;
            a_tok <= tok;
            a_fault <= fault;
            sret <= next;
            state <= S_RSP;
        end
    endtask

    task stream(input [31:0] word, input [23:0] n);
        begin
            t_cmd_valid <= 1'b1;
            t_cmd_addr <= base + ({{(DAW - 32){1'b0}}, word} << 2);
            t_cmd_words <= n;
            uw_need <= n;
        end
    endtask

    task stream_at(input [DAW-1:0] at, input [23:0] n);
        begin
            t_cmd_valid <= 1'b1;
            t_cmd_addr <= at;
            t_cmd_words <= n;
            uw_need <= n;
        end
    endtask

    task pass(input [2:0] op, input [VSA-1:0] src, input [VSA-1:0] dst, input [15:0] n,
              input [5:0] next);
        begin
            p_op <= op;
            p_src <= src;
            p_dst <= dst;
            p_n <= n;
            p_mi <= 16'd0;
            p_found <= 1'b0;
            pret <= next;
            state <= S_PASS;
        end
    endtask

    task divide(input [63:0] num, input [31:0] den, input [5:0] next);
        begin
            div_start <= 1'b1;
            div_num <= num;
            div_den <= den;
            dret <= next;
            state <= S_DIV;
        end
    endtask

    // A norm of lane ln's residual with gains block `blk`, into O_T, then
    // quantized for the next product; back to `next`.
    reg [VSA-1:0] q_src;
    reg [15:0]    q_n;
    task norm(input [7:0] blk, input [5:0] next, input [31:0] m);
        begin
            p_goff <= blk * MAX_D[GA-1:0];
            rret <= next;
            mx <= m;
            trk <= 1'b0;
            state <= S_RMS1;
        end
    endtask
    task quant(input [VSA-1:0] src, input [15:0] n, input [1:0] dst, input [5:0] next);
        begin
            q_src <= src;
            q_n <= n;
            p_qdst <= dst;
            rret <= next;
            mx <= 32'd0;
            trk <= 1'b0;
            pass(OP_MAX, src, src, n, S_QNT1);
        end
    endtask

    // `quant` with the largest magnitude `m` known (a tracked pass's):
    // straight to the division.
    task quant_known(input [VSA-1:0] src, input [15:0] n, input [5:0] next, input [31:0] m);
        begin
            q_src <= src;
            q_n <= n;
            p_qdst <= QT_QMEM;
            rret <= next;
            mx <= m;
            trk <= 1'b0;
            divide(64'd1 << 47, m, S_QNT2);
        end
    endtask

    integer pg;
    task product(input [31:0] word, input [SA-1:0] rows, input [15:0] cols, input [1:0] mode,
                 input [VSA-1:0] dst, input [LANES-1:0] mask);
        begin
            mv_own <= 1'b1;
            mv_start <= 1'b1;
            mv_addr <= base + ({{(DAW - 32){1'b0}}, word} << 2);
            mv_rows <= rows;
            mv_cols <= cols;
            mv_mode <= mode;
            mv_dst <= dst;
            mv_mask <= mask;
            // Its writes into the residual are each lane's new residual.
            if (dst == A_X)
                for (pg = 0; pg < LANES; pg = pg + 1)
                    l_xm[pg] <= 32'd0;
            state <= S_MVW;
        end
    endtask

    // Item j of the head's keys or values at this position: a word of
    // four, or (j = hw) the max.
    wire [23:0] pos_hd = {8'd0, pos} << hsh;
    task offer(input [7:0] j);
        begin
            if (j < hw) begin
                w_addr <= (kv_sel ? val_at : key_at) + {{(DAW - 24){1'b0}}, pos_hd} +
                          {{(DAW - 10){1'b0}}, j, 2'b00};
                w_data <= {kvbuf[{j[HA-3:0], 2'd3}], kvbuf[{j[HA-3:0], 2'd2}],
                           kvbuf[{j[HA-3:0], 2'd1}], kvbuf[{j[HA-3:0], 2'd0}]};
            end else begin
                w_addr <= (kv_sel ? vmax_at : kmax_at) + {{(DAW - 18){1'b0}}, pos, 2'b00};
                w_data <= kvmax;
            end
        end
    endtask

    integer k;
    always @(posedge clk) begin
        tbl_done <= 1'b0;
        t_we <= 1'b0;
        t_o <= 1'b0;
        t_x <= 1'b0;
        mv_start <= 1'b0;
        div_start <= 1'b0;
        w_clear <= 1'b0;
        if (t_cmd_valid && cmd_ready && !mv_own)
            t_cmd_valid <= 1'b0;
        if (rsp_valid && rsp_ready)
            rsp_valid <= 1'b0;
        if (rst) begin
            state <= S_IDLE;
            table_ok <= 1'b0;
            tbl_result <= R_OK;
            tbl_crc <= 32'd0;
            identity <= 256'd0;
            rsp_valid <= 1'b0;
            rsp_lane <= {LW{1'b0}};
            rsp_token <= 32'd0;
            rsp_fault <= F_NONE;
            t_cmd_valid <= 1'b0;
            w_valid <= 1'b0;
            mv_own <= 1'b0;
            ub_n <= 8'd0;
            uw_need <= 24'd0;
            pend <= {LANES{1'b0}};
            first <= {LANES{1'b0}};
            rmask <= {LANES{1'b0}};
            fmask <= {LANES{1'b0}};
            dmask <= {LANES{1'b0}};
            s1_v <= 1'b0;
            s2_v <= 1'b0;
            s3_v <= 1'b0;
            s4_v <= 1'b0;
            trk <= 1'b0;
            km_on <= 1'b0;
            sc1_v <= 1'b0;
            sc2_v <= 1'b0;
            sc3_v <= 1'b0;
            sc4_v <= 1'b0;
            hm_busy <= 1'b0;
            err <= 1'b0;
        end else begin
            // The sequencer's words: a beat in, a word out.
            if (uw_word) begin
                ub <= uw_pair ? ub >> 64 : ub >> 32;
                ub_n <= ub_n - uw_step;
            end
            if (s_valid && t_s_ready) begin
                ub <= s_data;
                ub_n <= uw_load[7:0];
                uw_need <= uw_need - uw_load;
            end
            if (s_valid && s_ready && s_err)
                err <= 1'b1;
            if (km_on && uw_word) begin
                kmbuf[kp[CA-1:0]] <= uw_data;
                kp <= kp + 16'd1;
                if (kp == pos)
                    km_on <= 1'b0;
            end

            // The shape's multiplier: a bit of hm_b a cycle.
            if (hm_busy) begin
                if (hm_b[0])
                    hm_p <= hm_p + hm_a;
                hm_a <= hm_a << 1;
                hm_b <= hm_b >> 1;
                if (hm_b[31:1] == 31'd0)
                    hm_busy <= 1'b0;
            end

            // Requests: a lane's, kept until its round answers it.
            if (req_valid && req_ready) begin
                pend[req_lane] <= 1'b1;
                first[req_lane] <= req_first;
                l_prompt[req_lane] <= req_prompt;
                l_len[req_lane] <= req_len;
                l_draw[req_lane] <= req_draw;
                l_greedy[req_lane] <= req_greedy;
                l_inv_t[req_lane] <= req_inv_t;
            end

            // ---- the vector pipeline ---------------------------------------
            s1_v <= p_issue;
            s1_i <= p_mi;
            if (p_issue)
                p_mi <= p_mi + 16'd1;
            s2_v <= s1_v;
            s2_i <= s1_i;
            if (s1_v) begin
                if (p_op == OP_MAX)
                    mx <= (vm_q[31] ? -vm_q : vm_q) > mx ? (vm_q[31] ? -vm_q : vm_q) : mx;
                s2_xs <= xs32[15:0];
                s2_g <= gm_q;
                s2_x <= vm_q;
                s2_ax <= vm_q[31] ? -vm_q : vm_q;
                s2_neg <= vm_q[31];
                s2_hs <= g_idx[0];
                s2_diff <= $signed({ptop[31], ptop}) - $signed({vm_q[31], vm_q});
                if (!s1_i[0]) begin
                    rot_a <= vm_q;
                end else begin
                    s2_pa <= $signed({{17{rot_a[31]}}, rot_a}) * $signed({{33{rm_q[15]}}, rm_q[15:0]}) -
                             $signed({{17{vm_q[31]}}, vm_q}) * $signed({{33{rm_q[31]}}, rm_q[31:16]});
                    s2_pb <= $signed({{17{rot_a[31]}}, rot_a}) * $signed({{33{rm_q[31]}}, rm_q[31:16]}) +
                             $signed({{17{vm_q[31]}}, vm_q}) * $signed({{33{rm_q[15]}}, rm_q[15:0]});
                end
            end
            s3_v <= s2_v;
            s3_i <= s2_i;
            if (s2_v) begin
                if (p_op == OP_SS)
                    ss <= ss + {16'd0, xs_sq};
                s3_p <= s3_m[47:0];
                s3_pg <= s3_m[48:0];
                s3_pr <= s3_m[79:0];
                s3_neg <= s2_neg;
                s3_prod <= s3_m[49:0];
                if (s2_i[0]) begin
                    s3_ra <= sat(rsh($signed({{79{s2_pa[48]}}, s2_pa}), 7'd14));
                    s3_rb <= sat(rsh($signed({{79{s2_pb[48]}}, s2_pb}), 7'd14));
                end
            end
            s4_v <= s3_v;
            s4_i <= s3_i;
            if (s3_v) begin
                s4_p <= $signed({{47{s3_p[47]}}, s3_p}) * $signed({48'd0, inv_r});
                s4_q <= s3_neg ? -$signed(s3_q) : $signed(s3_q);
                s4_y <= sat(rsh($signed({{79{s3_pg[48]}}, s3_pg}), 7'd15));
                s4_below <= (s3_bel > 50'd65535) ? 16'hFFFF : s3_bel[15:0];
            end
            if (s4_v) begin
                case (p_op)
                    OP_RMS, OP_ZERO, OP_GELU, OP_ROT: begin
                        t_we <= 1'b1;
                        t_waddr <= {ln, p_dst + s4_i[VSA-1:0]};
                        t_wdata <= (p_op == OP_ZERO) ? 32'd0 :
                                   (p_op == OP_GELU) ? s4_y :
                                   (p_op == OP_ROT) ? (s4_i[0] ? s3_rb : s3_ra) :
                                   sat(rsh($signed({{33{s4_p[94]}}, s4_p}), 7'd38));
                    end
                    OP_QNT: case (p_qdst)
                        QT_QMEM: qmem[s4_i[QA+$clog2(BPB)-1:$clog2(BPB)]]
                                     [DW * ln + 8 * s4_i[$clog2(BPB)-1:0] +: 8] <= s4_q;
                        QT_KV: kvbuf[s4_i[$clog2(MAX_HD)-1:0]] <= s4_q;
                        default: qh[s4_i[$clog2(MAX_HD)-1:0]] <= s4_q;
                    endcase
                    OP_W: if (!p_walk) begin
                        ptotal <= ptotal + {17'd0, w_w};
                    end else if (!p_found && s4_i != pbest) begin
                        if (px < {17'd0, w_w}) begin
                            p_found <= 1'b1;
                            pfound_i <= s4_i;
                        end else begin
                            px <= px - {17'd0, w_w};
                        end
                    end
                    default: ;
                endcase
            end

            // The tracked maxima, from what the write port writes.
            if (t_we && trk && mag(t_wdata) > mx)
                mx <= mag(t_wdata);
            if (t_we && t_o && mag(t_wdata) > l_om[ln])
                l_om[ln] <= mag(t_wdata);
            if (t_we && t_x && mag(t_wdata) > l_xm[ln])
                l_xm[ln] <= mag(t_wdata);
            if (mv_own && mv_we && mv_dst == A_X &&
                    mag(mv_wdata) > l_xm[mv_waddr[VA-1:VSA]])
                l_xm[mv_waddr[VA-1:VSA]] <= mag(mv_wdata);

            // ---- the scores' pipeline --------------------------------------
            sc2_v <= sc1_v;
            sc2_pp <= sc1_pp;
            sc2_t <= {{32{sc1_acc[31]}}, sc1_acc} * $signed({32'd0, mq});
            sc3_v <= sc2_v;
            sc3_pp <= sc2_pp;
            sc3_t <= {{32{sc2_t[63]}}, sc2_t} * $signed({64'd0, kmbuf[sc2_pp[CA-1:0]]});
            sc1_v <= 1'b0;
            // The product by log2(e) has its own stage: a DSP cascade and
            // a wide carry chain, kept apart from the compare.
            sc4_v <= sc3_v;
            sc4_pp <= sc3_pp;
            sc4_z <= z_new[47:0];
            if (sc4_v) begin
                zbuf[sc4_pp[CA-1:0]] <= sc4_z;
                if (sc4_pp == 16'd0 || sc4_z > ztop)
                    ztop <= sc4_z;
            end

            // ---- the sequencer ---------------------------------------------
            case (state)
                S_IDLE: begin
                    if (tbl_start) begin
                        table_ok <= 1'b0;
                        identity <= 256'd0;
                        base <= tbl_base;
                        region <= tbl_region;
                        crc <= 32'hFFFF_FFFF;
                        hi <= 4'd0;
                        err <= 1'b0;
                        w_clear <= 1'b1;
                        pend <= {LANES{1'b0}};
                        if (tbl_region < 32'd16) begin
                            tbl_result <= R_READ;
                            tbl_done <= 1'b1;
                        end else begin
                            stream_at(tbl_base, 24'd16);
                            state <= S_HDR;
                        end
                    end else if (pend != {LANES{1'b0}}) begin
                        lnx <= {(LW + 1){1'b0}};
                        if (!table_ok) begin
                            state <= S_NOTAB;
                        end else begin
                            rmask <= pend;
                            fmask <= {LANES{1'b0}};
                            dmask <= {LANES{1'b0}};
                            state <= S_PREP;
                        end
                    end
                end
                S_NOTAB: begin
                    if (nx_found) begin
                        lnx <= {1'b0, nx_lane} + 1'b1;
                        answer(nx_lane, 16'd0, F_NO_TABLE, S_NOTAB);
                    end else begin
                        state <= S_IDLE;
                    end
                end

                // ---- a commit ----------------------------------------------
                S_HDR: if (uw_word) begin
                    crc <= crc32_word(crc, uw_data);
                    if (!hi[3])
                        h[hi[2:0]] <= uw_data;
                    else
                        identity <= {identity[223:0], uw_data};
                    hi <= hi + 4'd1;
                    if (hi == 4'd15)
                        state <= S_CHECK;
                end
                S_CHECK: begin
                    words <= h[2];
                    nv <= h[3][15:0];
                    nd <= h[4][15:0];
                    nl <= h[5][7:0];
                    nh <= h[5][15:8];
                    nf <= h[6][15:0];
                    nc <= h[7][15:0];
                    // A head's width, a power of four: 4, 16 or 64.
                    hd <= (32'd4 * {24'd0, h[5][15:8]} == h[4]) ? 8'd4 :
                          (32'd16 * {24'd0, h[5][15:8]} == h[4]) ? 8'd16 :
                          (32'd64 * {24'd0, h[5][15:8]} == h[4]) ? 8'd64 : 8'd0;
                    hsh <= (32'd4 * {24'd0, h[5][15:8]} == h[4]) ? 3'd2 :
                           (32'd16 * {24'd0, h[5][15:8]} == h[4]) ? 3'd4 : 3'd6;
                    if (err) begin
                        tbl_result <= R_READ;
                        tbl_done <= 1'b1;
                        identity <= 256'd0;
                        state <= S_IDLE;
                    end else if (h[0] != MAGIC || h[1] != ENGINE || h[2] < 32'd16 || h[2] > region ||
                                 h[3] == 32'd0 || h[3] > MAX_V || h[4] == 32'd0 || h[4] > MAX_D ||
                                 h[4] % (4 * WPB) != 32'd0 || h[4] % BPB != 32'd0 ||
                                 h[6] == 32'd0 || h[6] > MAX_F || h[6] % (4 * WPB) != 32'd0 ||
                                 h[6] % BPB != 32'd0 ||
                                 h[5][31:16] != 16'd0 || h[5][7:0] == 8'd0 || {24'd0, h[5][7:0]} > MAX_L ||
                                 h[5][15:8] == 8'd0 || h[7] == 32'd0 || h[7] > MAX_C) begin
                        tbl_result <= R_BAD;
                        tbl_done <= 1'b1;
                        identity <= 256'd0;
                        state <= S_IDLE;
                    end else begin
                        state <= S_SHAPE;
                    end
                end
                S_SHAPE: begin
                    // hd is 1 << hsh.
                    rope_w <= ({16'd0, nc} << hsh) >> 1;
                    head_kv <= ({16'd0, nc} << (hsh + 3'd1)) + ({16'd0, nc} << 3);
                    hmul({16'd0, nd}, {16'd0, nd});
                    hm_step <= 3'd0;
                    state <= (hd == 8'd0 || {24'd0, hd} > MAX_HD) ? S_SHAPE3 : S_SHAPE2;
                end
                // A product a step, each read when the multiplier is done.
                S_SHAPE2: if (!hm_busy) begin
                    hm_step <= hm_step + 3'd1;
                    case (hm_step)
                        3'd0: begin
                            mat_dd <= {16'd0, nd} + hm_p[31:0] / 32'd4;
                            hmul({16'd0, nf}, {16'd0, nd});
                        end
                        3'd1: begin
                            mat_fd <= {16'd0, nf} + hm_p[31:0] / 32'd4;
                            mat_df <= {16'd0, nd} + hm_p[31:0] / 32'd4;
                            hmul({16'd0, nv}, {16'd0, nd});
                        end
                        3'd2: begin
                            mat_e <= {16'd0, nv} + hm_p[31:0] / 32'd4;
                            hmul(head_kv, {24'd0, nh});
                        end
                        3'd3: begin
                            layer_kv <= hm_p;
                            hmul(hm_p[31:0], {24'd0, nl});
                        end
                        3'd4: begin
                            lane_kv <= hm_p[31:0];
                            inc_a <= {16'd0, nd} + (mat_dd << 2);
                            inc_b <= {16'd0, nd} + mat_fd + mat_df;
                            phi_off <= 32'd16 + rope_w;
                            l0 <= 32'd16 + rope_w + 32'd1024 + mat_e;
                            hmul({16'd0, nd} + (mat_dd << 2) + {16'd0, nd} + mat_fd + mat_df, {24'd0, nl});
                        end
                        default: begin
                            nl_w <= hm_p[31:0];
                            state <= S_SHAPE3;
                        end
                    endcase
                end
                S_SHAPE3: begin
                    layer_w <= inc_a + inc_b;
                    kv_base <= base + ({{(DAW - 32){1'b0}}, words} << 2);
                    if (hd == 8'd0 || {24'd0, hd} > MAX_HD ||
                        l0 + nl_w + {16'd0, nd} != words ||
                        {32'd0, words} + ({32'd0, lane_kv} * LANES) / 64'd4 > {32'd0, region}) begin
                        tbl_result <= R_BAD;
                        tbl_done <= 1'b1;
                        identity <= 256'd0;
                        state <= S_IDLE;
                    end else begin
                        wi <= 32'd16;
                        gstart <= l0;
                        gblk <= 8'd0;
                        stream(32'd16, words[23:0] - 24'd16);
                        state <= S_BODY;
                    end
                end
                S_BODY: begin
                    if (uw_word) begin
                        crc <= crc32_word(crc, uw_data);
                        wi <= wi + 32'd1;
                        if (wi < phi_off)
                            rmem[rope_i[RA-1:0]] <= uw_data;
                        else if (wi < phi_off + 32'd1024)
                            phimem[phi_i[9:0]] <= uw_data;
                        if ({1'b0, gblk} <= {nl, 1'b0} && wi >= gstart && wi < gstart + {16'd0, nd}) begin
                            gmem[gain_i[GA-1:0]] <= uw_data;
                            if (wi == gstart + {16'd0, nd} - 32'd1) begin
                                gblk <= gblk + 8'd1;
                                gstart <= gstart + (gblk[0] ? inc_b : inc_a);
                            end
                        end
                    end
                    if (wi == words && !t_cmd_valid) begin
                        tbl_done <= 1'b1;
                        if (err) begin
                            tbl_result <= R_READ;
                            identity <= 256'd0;
                        end else begin
                            tbl_result <= R_OK;
                            tbl_crc <= ~crc;
                            table_ok <= 1'b1;
                        end
                        state <= S_IDLE;
                    end
                end

                // ---- a round: each lane's token, and its embedding ---------
                S_PREP: begin
                    if (nx_found) begin
                        ln <= nx_lane;
                        lnx <= {1'b0, nx_lane} + 1'b1;
                        if (first[nx_lane]) begin
                            first[nx_lane] <= 1'b0;
                            l_pos[nx_lane] <= 16'd0;
                            l_fed[nx_lane] <= 16'd0;
                            l_tok[nx_lane] <= EOS;
                            state <= S_FEED;
                        end else if (l_fed[nx_lane] < l_len[nx_lane]) begin
                            stream_at(l_prompt[nx_lane] + {{(DAW - 18){1'b0}}, l_fed[nx_lane], 2'b00}, 24'd1);
                            state <= S_TOKW;
                        end else begin
                            l_tok[nx_lane] <= l_last[nx_lane];
                            state <= S_FEED;
                        end
                    end else if (fmask == {LANES{1'b0}}) begin
                        state <= S_END;
                    end else begin
                        ph <= P_N1;
                        li <= 8'd0;
                        l_off <= 64'd0;
                        lw <= l0;
                        mvk <= 2'd0;
                        lnx <= {(LW + 1){1'b0}};
                        state <= S_LOOP;
                    end
                end
                S_TOKW: if (uw_word) begin
                    // A token past 16 bits is past any vocabulary.
                    l_tok[ln] <= (uw_data[31:16] != 16'd0) ? 16'hFFFF : uw_data[15:0];
                    l_fed[ln] <= l_fed[ln] + 16'd1;
                    state <= S_FEED;
                end
                S_FEED: begin
                    if (err) begin
                        state <= S_FAIL;
                        lnx <= {(LW + 1){1'b0}};
                        fmask <= fmask | ({{(LANES - 1){1'b0}}, 1'b1} << ln);
                    end else if (l_tok[ln] >= nv) begin
                        rmask[ln] <= 1'b0;
                        answer(ln, l_tok[ln], F_TOKEN, S_PREP);
                    end else if (l_pos[ln] >= nc) begin
                        rmask[ln] <= 1'b0;
                        answer(ln, 16'd0, F_FULL, S_PREP);
                    end else begin
                        fmask[ln] <= 1'b1;
                        dmask[ln] <= l_fed[ln] >= l_len[ln];
                        l_xm[ln] <= 32'd0;
                        stream(mat_e_at(l_tok[ln]), 24'd1);
                        state <= S_EMB_S;
                    end
                end
                S_EMB_S: if (uw_word) begin
                    escale <= uw_data;
                    stream(l0 - mat_e + {16'd0, nv} + {16'd0, l_tok[ln]} * {18'd0, nd[15:2]},
                           {10'd0, nd[15:2]});
                    ei <= 16'd0;
                    eb <= 2'd0;
                    state <= S_EMB_W;
                end
                S_EMB_W: if (uw_valid) begin
                    t_we <= 1'b1;
                    t_x <= 1'b1;
                    t_waddr <= {ln, A_X + ei[VSA-1:0]};
                    t_wdata <= sat(e_x);
                    eb <= eb + 2'd1;
                    ei <= ei + 16'd1;
                    if (ei == nd - 16'd1)
                        state <= S_PREP;
                end

                // ---- a round: the layers, lane by lane and product by product
                S_LOOP: begin
                    if (err || w_err) begin
                        lnx <= {(LW + 1){1'b0}};
                        state <= S_FAIL;
                    end else if (nx_found) begin
                        ln <= nx_lane;
                        lnx <= {1'b0, nx_lane} + 1'b1;
                        case (ph)
                            P_N1: norm({li[6:0], 1'b0}, S_LOOP, l_xm[nx_lane]);
                            P_ATT: begin
                                l_om[nx_lane] <= 32'd0;
                                rpos <= l_pos[nx_lane];
                                kv_sel <= 1'b0;
                                pass(OP_ROT, A_Q, A_Q, nd, S_ROT);
                            end
                            P_O1: quant_known(A_O, nd, S_LOOP, l_om[nx_lane]);
                            P_N2: norm({li[6:0], 1'b1}, S_LOOP, l_xm[nx_lane]);
                            P_G: begin
                                mx <= 32'd0;
                                trk <= 1'b1;
                                pass(OP_GELU, A_H, A_H, nf, S_GELU);
                            end
                            P_FN: norm({nl[6:0], 1'b0}, S_LOOP, l_xm[nx_lane]);
                            default: state <= S_PICK;
                        endcase
                    end else begin
                        state <= S_AFTER;
                    end
                end
                S_AFTER: begin
                    lnx <= {(LW + 1){1'b0}};
                    mvk <= mvk + 2'd1;
                    if (err || w_err) begin
                        state <= S_FAIL;
                    end else case (ph)
                        P_N1: if (mvk != 2'd3)
                                product(lw + {16'd0, nd} + (mvk[1] ? mat_dd << 1 : 32'd0) + (mvk[0] ? mat_dd : 32'd0), nd[SA-1:0], nd, 2'd0,
                                        (mvk == 2'd0) ? A_Q : (mvk == 2'd1) ? A_K : A_V, fmask);
                            else begin
                                mvk <= 2'd0;
                                ph <= P_ATT;
                                state <= S_LOOP;
                            end
                        P_ATT: begin
                            mvk <= 2'd0;
                            ph <= P_O1;
                            state <= S_LOOP;
                        end
                        P_O1: if (mvk == 2'd0)
                                product(lw + {16'd0, nd} + mat_dd + (mat_dd << 1), nd[SA-1:0], nd, 2'd1, A_X, fmask);
                            else begin
                                mvk <= 2'd0;
                                ph <= P_N2;
                                state <= S_LOOP;
                            end
                        P_N2: if (mvk == 2'd0)
                                product(lw + inc_a + {16'd0, nd}, nf[SA-1:0], nd, 2'd0, A_H, fmask);
                            else begin
                                mvk <= 2'd0;
                                ph <= P_G;
                                state <= S_LOOP;
                            end
                        P_G: if (mvk == 2'd0)
                                product(lw + inc_a + {16'd0, nd} + mat_fd, nd[SA-1:0], nf, 2'd1, A_X, fmask);
                            else begin
                                mvk <= 2'd0;
                                li <= li + 8'd1;
                                l_off <= l_off + layer_kv;
                                lw <= lw + layer_w;
                                if (li + 8'd1 < nl) begin
                                    ph <= P_N1;
                                    state <= S_LOOP;
                                end else if (dmask != {LANES{1'b0}}) begin
                                    ph <= P_FN;
                                    state <= S_LOOP;
                                end else begin
                                    state <= S_END;
                                end
                            end
                        P_FN: if (mvk == 2'd0)
                                product(l0 - mat_e, nv[SA-1:0], nd, 2'd2, A_LOG, dmask);
                            else begin
                                mvk <= 2'd0;
                                ph <= P_PICK;
                                state <= S_LOOP;
                            end
                        default: state <= S_END;
                    endcase
                end
                S_MVW: if (mv_done) begin
                    mv_own <= 1'b0;
                    state <= S_AFTER;
                end

                // ---- the vector routines -----------------------------------
                S_PASS: if (pass_idle)
                    state <= pret;
                S_DIV: if (div_done)
                    state <= dret;
                S_RMS1: begin
                    if (mx == 32'd0) begin
                        trk <= 1'b1;
                        pass(OP_ZERO, A_X, A_T, nd, S_QNT);
                    end else begin
                        sh <= (mx_bits > 6'd15) ? mx_bits[4:0] - 5'd15 : 5'd0;
                        ss <= 48'd0;
                        pass(OP_SS, A_X, A_X, nd, S_RMS2);
                    end
                end
                S_RMS2: divide({16'd0, ss}, {16'd0, nd}, S_RMS3);
                S_RMS3: begin
                    sq_v <= {div_q[31:0], 16'd0};
                    sq_res <= 48'd0;
                    sq_bit <= 48'd1 << 46;
                    state <= S_SQRT;
                end
                S_SQRT: begin
                    if (sq_bit == 48'd0) begin
                        divide(64'd1 << 46, (sq_res == 48'd0) ? 32'd1 : sq_res[31:0], S_RMS4);
                    end else begin
                        if (sq_v >= sq_res + sq_bit) begin
                            sq_v <= sq_v - (sq_res + sq_bit);
                            sq_res <= (sq_res >> 1) + sq_bit;
                        end else begin
                            sq_res <= sq_res >> 1;
                        end
                        sq_bit <= sq_bit >> 2;
                    end
                end
                S_RMS4: begin
                    inv_r <= div_q[46:0];
                    mx <= 32'd0;
                    trk <= 1'b1;
                    pass(OP_RMS, A_X, A_T, nd, S_QNT);
                end
                // A norm's output quantized for the product after it.
                S_QNT: quant_known(A_T, nd, rret, mx);
                S_QNT1: divide(64'd1 << 47, mx, S_QNT2);
                S_QNT2: begin
                    rq <= div_q[47:0];
                    pass(OP_QNT, q_src, q_src, q_n, S_QNT3);
                end
                S_QNT3: begin
                    case (p_qdst)
                        QT_QMEM: l_m[ln] <= mx;
                        QT_KV: kvmax <= mx;
                        default: mq <= mx;
                    endcase
                    state <= rret;
                end
                S_GELU: quant_known(A_H, nf, S_LOOP, mx);

                // ---- the attention: lane ln, head by head ------------------
                S_ROT: begin
                    if (!kv_sel) begin
                        kv_sel <= 1'b1;
`ifdef FABRIC_MUTANTS
                        // Broken: the key rotated for the position after
                        // its own.
                        if (break_lm_rope)
                            rpos <= rpos + 16'd1;
`endif
                        pass(OP_ROT, A_K, A_K, nd, S_ROT);
                    end else begin
                        kv_sel <= 1'b0;
                        hh <= 8'd0;
                        h_off <= 64'd0;
                        state <= S_HEAD;
                    end
                end
                S_HEAD: begin
                    kvj <= 8'd0;
                    quant(A_K + hh_hd, {8'd0, hd}, QT_KV, S_KVW);
                end
                S_KVW: begin
                    // The head's words, then its max, at this position.
                    if (!w_valid) begin
                        w_valid <= 1'b1;
                        offer(kvj);
                    end else if (w_ready) begin
                        if (kvj == hw) begin
                            w_valid <= 1'b0;
                            state <= S_KVW2;
                        end else begin
                            kvj <= kvj + 8'd1;
                            offer(kvj + 8'd1);
                        end
                    end
                end
                S_KVW2: begin
                    kvj <= 8'd0;
                    if (!kv_sel) begin
                        kv_sel <= 1'b1;
                        quant(A_V + hh_hd, {8'd0, hd}, QT_KV, S_KVW);
                    end else begin
                        kv_sel <= 1'b0;
                        state <= S_AWAIT;
                    end
                end
                // The keys' maxima, the position's among them, once its
                // writes are answered; read as the query is quantized.
                S_AWAIT: if (w_idle) begin
                    stream_at(kmax_at + rd_off, {8'd0, pos1});
                    kp <= 16'd0;
                    km_on <= 1'b1;
                    quant(A_Q + hh_hd, {8'd0, hd}, QT_QH, S_HEAD2);
                end
                S_HEAD2: if (!km_on || (uw_word && kp == pos)) begin
                    stream_at(key_at + rd_off, head_words);
                    pp <= 16'd0;
                    wj <= 8'd0;
                    acck <= 32'sd0;
                    state <= S_KEYS;
                end
                S_KEYS: begin
                    if (uw_word) begin
                        if (wj == hw - uw_step) begin
                            sc1_v <= 1'b1;
                            sc1_pp <= pp;
                            sc1_acc <= acck + k_dot;
                            acck <= 32'sd0;
                            wj <= 8'd0;
                            pp <= pp + 16'd1;
                        end else begin
                            acck <= acck + k_dot;
                            wj <= wj + uw_step;
                        end
                    end
                    if (pp == pos1 && !sc1_v && !sc2_v && !sc3_v && !sc4_v) begin
                        stream_at(vmax_at + rd_off, {8'd0, pos1});
                        pp <= 16'd0;
                        wtot <= 32'd0;
                        state <= S_WTS;
                    end
                end
                // A position's weight as its value's max arrives: the
                // maxima's read costs the weights' pass no more cycles.
                S_WTS: if (uw_word) begin
                    wbuf[pp[CA-1:0]] <= z_w;
                    vmbuf[pp[CA-1:0]] <= uw_data;
                    wtot <= wtot + {15'd0, z_w};
                    pp <= pp + 16'd1;
                    if (pp == pos)
                        state <= S_HEAD3;
                end
                S_HEAD3: divide(64'd1 << 48, wtot, S_WTS2);
                S_WTS2: begin
                    ainv <= div_q[48:0];
                    stream_at(val_at + rd_off, head_words);
                    for (k = 0; k < MAX_HD; k = k + 1)
                        accv[k] <= 72'sd0;
                    pp <= 16'd0;
                    wj <= 8'd0;
                    state <= S_VALS;
                end
                S_VALS: begin
                    if (uw_word) begin
                        for (k = 0; k < 4; k = k + 1)
                            accv[{wj[HA-3:0], k[1:0]}] <= accv[{wj[HA-3:0], k[1:0]}] +
                                $signed({{23{1'b0}}, v_wv}) * $signed({{64{uw_data[8*k+7]}}, uw_data[8*k +: 8]});
                        if (uw_pair)
                            for (k = 0; k < 4; k = k + 1)
                                accv[{wj[HA-3:1], 1'b1, k[1:0]}] <= accv[{wj[HA-3:1], 1'b1, k[1:0]}] +
                                    $signed({{23{1'b0}}, v_wv}) * $signed({{64{uw_data2[8*k+7]}}, uw_data2[8*k +: 8]});
                        if (wj == hw - uw_step) begin
                            wj <= 8'd0;
                            pp <= pp + 16'd1;
                        end else begin
                            wj <= wj + uw_step;
                        end
                    end
                    if (pp == pos1) begin
                        oe <= 8'd0;
                        state <= S_OUT;
                    end
                end
                S_OUT: begin
                    o_p <= o_prod;
                    o_r <= rsh(o_p, 7'd55);
                    if (oe >= 8'd2) begin
                        t_we <= 1'b1;
                        t_o <= 1'b1;
                        t_waddr <= {ln, A_O + hh_hd +
                                    {{(VSA - 8){1'b0}}, oe - 8'd2}};
                        t_wdata <= sat(o_r);
                    end
                    oe <= oe + 8'd1;
                    if (oe == hd + 8'd1) begin
                        hh <= hh + 8'd1;
                        h_off <= h_off + {32'd0, head_kv};
                        state <= (hh + 8'd1 == nh) ? S_LOOP : S_HEAD;
                    end
                end

                // ---- the pick: lane ln's token from its logits --------------
                S_PICK: begin
                    pbest <= {{(16 - SA){1'b0}}, mv_best_row[SA*ln +: SA]};
                    ptop <= mv_best[32*ln +: 32];
                    pinv <= l_inv_t[ln];
                    ptotal <= 34'd0;
                    p_walk <= 1'b0;
                    if (l_greedy[ln])
                        answer(ln, {{(16 - SA){1'b0}}, mv_best_row[SA*ln +: SA]}, F_NONE, S_LOOP);
                    else
                        pass(OP_W, A_LOG, A_LOG, nv, S_PICK2);
                end
                S_PICK2: begin
                    if (pdraw < 68'd65536) begin
                        answer(ln, pbest, F_NONE, S_LOOP);
                    end else begin
                        px <= pdraw[33:0] - 34'd65536;
                        p_walk <= 1'b1;
                        pass(OP_W, A_LOG, A_LOG, nv, S_PICK3);
                    end
                end
                S_PICK3: answer(ln, p_found ? pfound_i : pbest, F_NONE, S_LOOP);

                S_RSP: if (!rsp_valid) begin
                    rsp_valid <= 1'b1;
                    rsp_lane <= a_lane;
                    rsp_token <= {16'd0, a_tok};
                    rsp_fault <= a_fault;
                    pend[a_lane] <= 1'b0;
                    if (a_fault == F_NONE)
                        l_last[a_lane] <= a_tok;
                    state <= sret;
                end
                S_FAIL: begin
                    // A read or write failed: every request of the round
                    // ends, and the table goes until the next commit.
                    if (nx_found) begin
                        lnx <= {1'b0, nx_lane} + 1'b1;
                        answer(nx_lane, 16'd0, F_READ, S_FAIL);
                    end else begin
                        table_ok <= 1'b0;
                        err <= 1'b0;
                        w_clear <= 1'b1;
                        rmask <= {LANES{1'b0}};
                        fmask <= {LANES{1'b0}};
                        dmask <= {LANES{1'b0}};
                        state <= S_IDLE;
                    end
                end
                S_END: begin
                    for (k = 0; k < LANES; k = k + 1)
                        if (fmask[k])
                            l_pos[k] <= l_pos[k] + 16'd1;
                    rmask <= {LANES{1'b0}};
                    fmask <= {LANES{1'b0}};
                    dmask <= {LANES{1'b0}};
                    state <= S_IDLE;
                end
                default: state <= S_IDLE;
            endcase
        end
    end
endmodule

`default_nettype wire
