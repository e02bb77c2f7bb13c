// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_engine: the word-trigram engine, version 2: its model's table lies
// in DDR (docs/fabric-contract.md sections 7 and 9, format FTB2) and the
// engine reads it through its own AXI4 read master. The bitstream carries
// the engine; the host commits the model.
//
// A commit reads the table in: its header (the magic, the engine, the words
// it declares against the region's, its index sizes), then every word, for
// the CRC-32 the slot reports. A step reads what it needs: the context's
// trigram index window (WINDOW buckets from the key's home, more windows
// while the probe finds neither the key nor an empty bucket), else the
// bigram index's, else the unigrams; then the candidates. Greedy, or a
// single candidate: the first one's token. Scaled: the candidates' weights
// as their words arrive (into a buffer of MAX_CANDIDATES), the draw scaled
// to their sum, and a walk of the buffer to the candidate it lands in.
// firmware/fabric-model's Table::step is the same computation, read for
// read; the co-simulation checks they agree, token for token.
//
// Every read is bounded by the words the table declares: a probe or a
// candidate past its end is a fault (TABLE_READ), as is a bus error. The
// engine keeps no state between steps but the table's header: the shell
// holds each context's tokens and random stream, so one engine serves
// every lane of its slot, a step at a time.

`default_nettype none

module fabric_engine #(
    parameter integer DAW = 40,          // physical address bits
    parameter integer MAX_BURST = 16,    // 16 on an AXI3 port (Zynq-7000 HP)
    parameter integer MAX_OUT = 4,       // bursts outstanding
    parameter integer WINDOW = 4,        // buckets a probe reads at once
    parameter integer MAX_CANDIDATES = 512
) (
    input  wire           clk,
    input  wire           rst,

    // A commit: read the table at tbl_base, in a region of tbl_region words.
    input  wire           tbl_start,
    input  wire [DAW-1:0] tbl_base,
    input  wire [31:0]    tbl_region,
    output reg            tbl_done,      // a cycle, with the result
    output reg  [1:0]     tbl_result,    // 0: taken, 1: not a table of ours, 2: a read failed
    output reg  [31:0]    tbl_crc,
    output reg  [255:0]   identity,      // header words 8..15, the first most significant
    output wire           reading,       // a read under way (SLOT_SHUTDOWN's read channel)

    input  wire           req_valid,
    output wire           req_ready,
    input  wire [31:0]    req_a,
    input  wire [31:0]    req_b,
    input  wire [31:0]    req_draw,      // the high half of the step's SplitMix64 output
    input  wire           req_greedy,
    input  wire [19:0]    req_inv_t,     // floor(256 / T)

    output reg            rsp_valid,
    input  wire           rsp_ready,
    output reg  [31:0]    rsp_token,
    output reg  [1:0]     rsp_fault,     // 0: a token, 1: no table, 2: a read failed

    output wire [DAW-1:0] m_araddr,
    output wire [7:0]     m_arlen,
    output wire [2:0]     m_arsize,
    output wire [1:0]     m_arburst,
    output wire           m_arvalid,
    input  wire           m_arready,
    input  wire [31:0]    m_rdata,
    input  wire [1:0]     m_rresp,
    input  wire           m_rlast,
    input  wire           m_rvalid,
    output wire           m_rready
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_bound;
    initial break_bound = $test$plusargs("fabric_break_bound") != 0;
`endif

    localparam [31:0] MAGIC = 32'h4654_4232;       // "FTB2"
    localparam [31:0] ENGINE = {16'd2, 16'd1};     // version 2, kind 1: word trigrams
    localparam [31:0] HASH = 32'h9E37_79B1;
    localparam [31:0] EOS = 32'd256;
    localparam [1:0]  R_OK = 2'd0, R_BAD = 2'd1, R_READ = 2'd2;
    localparam [1:0]  F_NONE = 2'd0, F_NO_TABLE = 2'd1, F_READ = 2'd2;
    localparam integer CW = $clog2(MAX_CANDIDATES);
    localparam [15:0] CHUNK = 16'd4096;            // beats a body command asks for

    localparam [4:0]
        S_IDLE    = 5'd0,
        S_HDR     = 5'd1,
        S_CHECK   = 5'd2,
        S_BODY    = 5'd3,
        S_HASH    = 5'd4,
        S_HASH2   = 5'd5,
        S_HOME    = 5'd6,
        S_PROBE   = 5'd7,
        S_SCAN    = 5'd8,
        S_CANDS   = 5'd9,
        S_ONE     = 5'd10,
        S_GATHER  = 5'd11,
        S_DRAW    = 5'd12,
        S_DRAW2   = 5'd13,
        S_DRAW3   = 5'd14,
        S_WALK    = 5'd15,
        S_RSP     = 5'd16;

    reg [4:0] state;

    // ---- the read master ------------------------------------------------------
    reg            cmd_valid;
    wire           cmd_ready;
    reg  [DAW-1:0] cmd_addr;
    reg  [15:0]    cmd_beats;
    wire           rd_valid, rd_last, rd_err, rd_idle;
    wire [31:0]    rd_data;
    wire           unused_tag;

    fabric_axi_rd #(
        .AW(DAW), .DW(32), .MAX_BURST(MAX_BURST), .MAX_OUT(MAX_OUT), .TW(1), .BW(16)
    ) rd (
        .clk(clk), .rst(rst),
        .cmd_valid(cmd_valid), .cmd_ready(cmd_ready), .cmd_addr(cmd_addr),
        .cmd_beats(cmd_beats), .cmd_tag(1'b0),
        .rd_valid(rd_valid), .rd_ready(1'b1), .rd_data(rd_data), .rd_tag(unused_tag),
        .rd_last(rd_last), .rd_err(rd_err),
        .m_araddr(m_araddr), .m_arlen(m_arlen), .m_arsize(m_arsize), .m_arburst(m_arburst),
        .m_arvalid(m_arvalid), .m_arready(m_arready), .m_rdata(m_rdata), .m_rresp(m_rresp),
        .m_rlast(m_rlast), .m_rvalid(m_rvalid), .m_rready(m_rready),
        .idle(rd_idle)
    );
    assign reading = !rd_idle || cmd_valid;
    wire beat = rd_valid;

`include "fabric_crc32.vh"
`include "fabric_exp2.vh"

    // ---- the table ------------------------------------------------------------
    reg [DAW-1:0] base_addr;
    reg [31:0]    region;
    reg           table_ok;
    reg [31:0]    crc;
    reg [3:0]     hi;                 // header word
    reg [31:0]    h_magic, h_engine, h_words, h_uni, h_bi, h_tri, h_sizes;
    reg [32:0]    body_at;            // the next word a body command asks for
    reg           err;                // a read of this commit or step failed
    wire [7:0]    bi_bits = h_sizes[7:0];
    wire [7:0]    tri_bits = h_sizes[15:8];
    wire [15:0]   uni_count = h_sizes[31:16];
    wire [32:0]   words = {1'b0, h_words};

    // Asks for `beats` words from word `at` of the table.
    task ask(input [32:0] at, input [15:0] beats);
        begin
            cmd_valid <= 1'b1;
            cmd_addr <= base_addr + {{(DAW - 35){1'b0}}, at, 2'b00};
            cmd_beats <= beats;
        end
    endtask


    // ---- the step -----------------------------------------------------------
    reg [31:0] b, draw;
    reg        greedy;
    reg [19:0] inv_t;
    reg        level;                 // 0: the trigram index, 1: the bigram
    reg [31:0] key, ibase;
    reg [7:0]  bits;
    reg [31:0] m_lo;                  // key's low half * HASH, its low word
    reg [15:0] m_hi;                  // key's high half * HASH's low half, its low half
    reg [31:0] prod;                  // key * HASH, its low word
    reg [32:0] at;                    // the probe's bucket
    reg [15:0] nb, j;                 // beats of the probe's window, and taken
    reg [31:0] kw;                    // the key word of the bucket read
    reg        decided, hit;
    reg [31:0] entry;
    reg [31:0] first;
    reg [CW:0] n;                     // candidates (at most MAX_CANDIDATES)

    assign req_ready = state == S_IDLE && !tbl_start && !rsp_valid;

    // The weights as the candidates arrive: a pipeline of four stages, a
    // candidate a cycle (fabric_hw::sampling::weight).
    reg [15:0] first_log, first_token;
    reg [CW:0] g_in, g_out;           // candidates in, and written to the buffer
    reg        p0, p1, p2, p3;
    reg [15:0] log0, tok0, tok1, tok2;
    reg [CW-1:0] i0, i1, i2, i3;
    reg [35:0] d1;                    // diff * inv_t
    reg [16:0] e2;                    // exp2 of the fraction
    reg [4:0]  sh2;
    reg        zero2;
    reg [16:0] w3;
    reg [15:0] tok3;
    reg [25:0] total;                 // at most 512 * 65536
    reg [32:0] cbuf [0:MAX_CANDIDATES-1];   // token, weight
    wire [16:0] d1_whole = d1[35:19];
    wire [7:0]  d1_frac = d1[18:11];
    wire [10:0] unused_d1 = d1[10:0];

    always @(posedge clk) begin
        p1 <= p0;
        p2 <= p1;
        p3 <= p2;
        // Stage 1: the log's distance below the first candidate's, scaled.
        d1 <= {20'd0, (first_log > log0) ? first_log - log0 : 16'd0} * {16'd0, inv_t};
        tok1 <= tok0;
        i1 <= i0;
        // Stage 2: the fraction's weight, and how many halvings.
        e2 <= exp2_q16(d1_frac);
        sh2 <= d1_whole[4:0];
        zero2 <= d1_whole >= 17'd17;
        tok2 <= tok1;
        i2 <= i1;
        // Stage 3: the weight.
        w3 <= zero2 ? 17'd0 : e2 >> sh2;
        tok3 <= tok2;
        i3 <= i2;
        if (p3)
            cbuf[i3] <= {tok3, w3};
    end

    // The draw scaled to the sum of the weights: (draw * total) >> 32.
    reg [31:0] m_draw;
    reg [25:0] m_total;
    reg [57:0] m_prod;
    reg [25:0] x;
    always @(posedge clk) begin
        m_draw <= draw;
        m_total <= total;
        m_prod <= m_draw * m_total;
    end

    // The walk: the buffer read a candidate a cycle.
    reg [CW-1:0] w_addr, w_idx;
    reg [32:0]   w_q;
    reg          w_v, w_issue;
    wire [16:0]  w_weight = w_q[16:0];
    wire [15:0]  w_token = w_q[32:17];
    always @(posedge clk)
        w_q <= cbuf[w_addr];

    task respond(input [31:0] token, input [1:0] fault);
        begin
            rsp_valid <= 1'b1;
            rsp_token <= token;
            rsp_fault <= fault;
            state <= S_RSP;
        end
    endtask

    wire [31:0] home = (bits == 8'd0) ? 32'd0 : prod >> (6'd32 - bits[5:0]);
    wire [32:0] left_words = words - at;
    localparam integer WINDOW_W = 2 * WINDOW;
    localparam [15:0] WINDOW_BEATS = WINDOW_W[15:0];
    wire [15:0] window = (left_words < {17'd0, WINDOW_BEATS}) ? left_words[15:0] : WINDOW_BEATS;
    wire [32:0] cand_end = {1'b0, first} + {{(32 - CW){1'b0}}, n};
    // A bucket's entry word decides the probe: empty, or the key's.
    wire        bucket_empty = rd_data == 32'd0;
    wire        bucket_hit = kw == key;

    always @(posedge clk) begin
        tbl_done <= 1'b0;
        p0 <= 1'b0;
        if (cmd_valid && cmd_ready)
            cmd_valid <= 1'b0;
        if (rst) begin
            state <= S_IDLE;
            table_ok <= 1'b0;
            rsp_valid <= 1'b0;
            rsp_fault <= F_NONE;
            rsp_token <= 32'd0;
            cmd_valid <= 1'b0;
            tbl_result <= R_OK;
            tbl_crc <= 32'd0;
            identity <= 256'd0;
        end else begin
            case (state)
                S_IDLE: begin
                    if (tbl_start) begin
                        table_ok <= 1'b0;
                        identity <= 256'd0;
                        base_addr <= tbl_base;
                        region <= tbl_region;
                        crc <= 32'hFFFF_FFFF;
                        hi <= 4'd0;
                        err <= 1'b0;
                        if (tbl_region < 32'd16) begin
                            // Not even a header's room: a read past the
                            // region.
                            tbl_result <= R_READ;
                            tbl_done <= 1'b1;
                        end else begin
                            cmd_valid <= 1'b1;
                            cmd_addr <= tbl_base;
                            cmd_beats <= 16'd16;
                            state <= S_HDR;
                        end
                    end else if (req_valid && !rsp_valid) begin
                        b <= req_b;
                        draw <= req_draw;
                        greedy <= req_greedy;
                        inv_t <= req_inv_t;
                        err <= 1'b0;
                        if (!table_ok) begin
                            respond(32'd0, F_NO_TABLE);
                        end else if (req_a[31:16] != 16'd0 || req_b[31:16] != 16'd0) begin
                            // A token beyond 16 bits is in no trigram context.
                            level <= 1'b1;
                            key <= req_b;
                            ibase <= h_bi;
                            bits <= bi_bits;
                            state <= S_HASH;
                        end else begin
                            level <= 1'b0;
                            key <= {req_a[15:0], req_b[15:0]};
                            ibase <= h_tri;
                            bits <= tri_bits;
                            state <= S_HASH;
                        end
                    end
                end

                // ---- a commit ----------------------------------------------
                S_HDR: begin
                    if (beat) begin
                        crc <= crc32_word(crc, rd_data);
                        err <= err || rd_err;
                        case (hi)
                            4'd0: h_magic <= rd_data;
                            4'd1: h_engine <= rd_data;
                            4'd2: h_words <= rd_data;
                            4'd4: h_uni <= rd_data;
                            4'd5: h_bi <= rd_data;
                            4'd6: h_tri <= rd_data;
                            4'd7: h_sizes <= rd_data;
                            default: ;
                        endcase
                        if (hi[3])
                            identity <= {identity[223:0], rd_data};
                        hi <= hi + 4'd1;
                        if (rd_last)
                            state <= S_CHECK;
                    end
                end
                S_CHECK: begin
                    if (err) begin
                        tbl_result <= R_READ;
                        tbl_done <= 1'b1;
                        state <= S_IDLE;
                    end else if (h_magic != MAGIC || h_engine != ENGINE ||
                                 h_words < 32'd16 || h_words > region ||
                                 bi_bits > 8'd24 || tri_bits > 8'd24 ||
                                 uni_count > MAX_CANDIDATES[15:0]) begin
                        tbl_result <= R_BAD;
                        tbl_done <= 1'b1;
                        identity <= 256'd0;
                        state <= S_IDLE;
                    end else begin
                        body_at <= 33'd16;
                        state <= S_BODY;
                    end
                end
                S_BODY: begin
                    // Every word once, in order, for the CRC; a command of
                    // up to CHUNK beats at a time, the next asked for while
                    // the last one's beats arrive.
                    if (beat) begin
                        crc <= crc32_word(crc, rd_data);
                        err <= err || rd_err;
                    end
                    if (!cmd_valid && cmd_ready && body_at < words && !err && !(beat && rd_err)) begin
                        ask(body_at, (words - body_at < {17'd0, CHUNK}) ? (words[15:0] - body_at[15:0])
                                                                       : CHUNK);
                        body_at <= (words - body_at < {17'd0, CHUNK}) ? words : body_at + {17'd0, CHUNK};
                    end else if (!cmd_valid && rd_idle && !beat && (body_at >= words || err)) begin
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

                // ---- a step: the probe -------------------------------------
                // The key's hash, its low word, in two halves: what a DSP
                // multiplies in a cycle.
                S_HASH: begin
                    m_lo <= {16'd0, key[15:0]} * HASH;
                    m_hi <= key[31:16] * HASH[15:0];
                    state <= S_HASH2;
                end
                S_HASH2: begin
                    prod <= m_lo + {m_hi, 16'd0};
                    state <= S_HOME;
                end
                S_HOME: begin
                    at <= {1'b0, ibase} + {home, 1'b0};
                    state <= S_PROBE;
                end
                S_PROBE: begin
`ifdef FABRIC_MUTANTS
                    // Broken: unbounded.
                    if (!break_bound && at + 33'd1 >= words) begin
`else
                    if (at + 33'd1 >= words) begin
`endif
                        // The bucket's entry word is past the table.
                        respond(32'd0, F_READ);
                    end else begin
                        ask(at, window);
                        nb <= window;
                        j <= 16'd0;
                        decided <= 1'b0;
                        state <= S_SCAN;
                    end
                end
                S_SCAN: begin
                    if (beat) begin
                        err <= err || rd_err;
                        j <= j + 16'd1;
                        if (!j[0]) begin
                            kw <= rd_data;
                        end else if (!decided) begin
                            if (bucket_empty) begin
                                decided <= 1'b1;
                                hit <= 1'b0;
                            end else if (bucket_hit) begin
                                decided <= 1'b1;
                                hit <= 1'b1;
                                entry <= rd_data;
                            end
                        end
                        if (rd_last) begin
                            // The window's last beat: this one decides too.
                            if (err || rd_err) begin
                                respond(32'd0, F_READ);
                            end else if (decided || (j[0] && (bucket_empty || bucket_hit))) begin
                                state <= S_CANDS;
                                if (decided ? hit : !bucket_empty) begin
                                    first <= {8'd0, (decided ? entry[31:8] : rd_data[31:8])};
                                    n <= {{(CW - 7){1'b0}}, (decided ? entry[7:0] : rd_data[7:0])};
                                end else if (level == 1'b0) begin
                                    // No trigram: the bigram index, by b.
                                    level <= 1'b1;
                                    key <= b;
                                    ibase <= h_bi;
                                    bits <= bi_bits;
                                    state <= S_HASH;
                                end else begin
                                    first <= h_uni;
                                    n <= uni_count[CW:0];
                                end
                            end else begin
                                // Neither the key nor an empty bucket: the
                                // next window, from the first bucket not
                                // read whole.
                                at <= at + {17'd0, nb[15:1], 1'b0};
                                state <= S_PROBE;
                            end
                        end
                    end
                end

                // ---- a step: the candidates --------------------------------
                S_CANDS: begin
                    g_in <= {(CW + 1){1'b0}};
                    g_out <= {(CW + 1){1'b0}};
                    total <= 26'd0;
                    if (n == {(CW + 1){1'b0}}) begin
                        respond(EOS, F_NONE);
                    end else if (greedy || n == {{CW{1'b0}}, 1'b1}) begin
                        if ({1'b0, first} >= words) begin
                            respond(32'd0, F_READ);
                        end else begin
                            ask({1'b0, first}, 16'd1);
                            state <= S_ONE;
                        end
                    end else if (cand_end > words) begin
                        respond(32'd0, F_READ);
                    end else begin
                        ask({1'b0, first}, {{(15 - CW){1'b0}}, n});
                        state <= S_GATHER;
                    end
                end
                S_ONE: begin
                    if (beat)
                        respond(rd_err ? 32'd0 : {16'd0, rd_data[31:16]}, rd_err ? F_READ : F_NONE);
                end
                S_GATHER: begin
                    if (beat) begin
                        err <= err || rd_err;
                        p0 <= 1'b1;
                        log0 <= rd_data[15:0];
                        tok0 <= rd_data[31:16];
                        i0 <= g_in[CW-1:0];
                        g_in <= g_in + 1'b1;
                        if (g_in == {(CW + 1){1'b0}}) begin
                            first_log <= rd_data[15:0];
                            first_token <= rd_data[31:16];
                        end
                    end
                    if (p3) begin
                        total <= total + {9'd0, w3};
                        g_out <= g_out + 1'b1;
                        if (g_out + 1'b1 == n)
                            state <= S_DRAW;
                    end
                end
                S_DRAW: begin
                    // The sum is in: the product's operands are taken now.
                    if (err) begin
                        respond(32'd0, F_READ);
                    end else begin
                        state <= S_DRAW2;
                    end
                end
                S_DRAW2: state <= S_DRAW3;
                S_DRAW3: begin
                    x <= m_prod[57:32];
                    w_addr <= {CW{1'b0}};
                    w_issue <= 1'b1;
                    w_v <= 1'b0;
                    state <= S_WALK;
                end
                S_WALK: begin
                    // The address goes out a cycle before its candidate
                    // comes back.
                    w_v <= w_issue;
                    w_idx <= w_addr;
                    if (w_issue) begin
                        if ({1'b0, w_addr} + 1'b1 == n)
                            w_issue <= 1'b0;
                        else
                            w_addr <= w_addr + 1'b1;
                    end
                    if (w_v) begin
                        if (x < {9'd0, w_weight}) begin
                            respond({16'd0, w_token}, F_NONE);
                        end else if ({1'b0, w_idx} + 1'b1 == n) begin
                            // Unreachable with a well-formed table (x <
                            // total); the reference falls back to the
                            // first candidate.
                            respond({16'd0, first_token}, F_NONE);
                        end else begin
                            x <= x - {9'd0, w_weight};
                        end
                    end
                end

                S_RSP: begin
                    if (rsp_ready) begin
                        rsp_valid <= 1'b0;
                        state <= S_IDLE;
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end

    // Header words the engine has no use for, and bits it cannot see.
    wire unused = ^{nb[0], m_prod[31:0]};
endmodule

`default_nettype wire
