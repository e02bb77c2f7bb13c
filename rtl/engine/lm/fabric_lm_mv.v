// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_lm_mv: the transformer engine's matrix products, batched: one
// read of a matrix serves every context of the round (`mask`), each
// weight beat multiplied with every context's input at once.
//
// A product reads the matrix's row scales (a word a row, into `sbuf`),
// then its int8 weights, DW/8 a beat, row after row (contract section 10:
// scales first, then rows of `cols` weights). Each beat meets the beat's
// columns of every lane's quantized input (`qmem`, LANES x DW bits a
// column group) in an array of LANES x DW/8 int8 multipliers and an adder
// tree a lane; a row's last beat hands the row's sums to the scaler, which
// takes a lane a cycle: `y = round_shift(acc * scale * m, 37)` saturated
// (fabric_model::lm::arith::matvec), written into the lane's vector
// memory at `dst + row`, or added to what is there (`mode` 1, the
// residual), or written with the lane's highest logit and its row kept
// (`mode` 2, the logits: the lowest row among equals).

`default_nettype none

module fabric_lm_mv #(
    parameter integer AW = 40,
    parameter integer DW = 64,
    parameter integer LANES = 4,
    parameter integer QA = 7,            // bits of a column group's index
    parameter integer SA = 13,           // bits of a row's index
    parameter integer VA = 15,           // bits of a vector memory address
    parameter integer VSA = 13,          // bits of an address within a lane
    // Derived from the parameters above: leave them be.
    parameter integer BPB = DW / 8,
    parameter integer WPB = DW / 32,
    parameter integer LW = (LANES > 1) ? $clog2(LANES) : 1
) (
    input  wire                clk,
    input  wire                rst,

    input  wire                start,
    input  wire [AW-1:0]       addr,       // the scales' first byte
    input  wire [SA-1:0]       rows,
    input  wire [15:0]         cols,       // a multiple of BPB
    input  wire [1:0]          mode,       // 0 write, 1 add, 2 logits
    input  wire [VSA-1:0]      dst,
    input  wire [LANES-1:0]    mask,
    input  wire [LANES*32-1:0] m,          // each lane's input max (Q16)
    output reg                 done,
    output reg  [LANES*32-1:0] best,       // mode 2: each lane's highest logit
    output reg  [LANES*SA-1:0] best_row,   //   and its row

    // The engine's read stream, while the product runs.
    output reg                 cmd_valid,
    input  wire                cmd_ready,
    output reg  [AW-1:0]       cmd_addr,
    output reg  [23:0]         cmd_words,
    input  wire                s_valid,
    output wire                s_ready,
    input  wire [DW-1:0]       s_data,

    // The lanes' quantized inputs.
    output wire [QA-1:0]       q_addr,
    input  wire [LANES*DW-1:0] q_data,      // the cycle after q_addr

    // The lanes' vector memory: a read (the cycle after) and a write.
    output wire [VA-1:0]       v_raddr,
    input  wire [31:0]         v_rdata,
    output reg                 v_we,
    output reg  [VA-1:0]       v_waddr,
    output reg  [31:0]         v_wdata
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_lm_scale;
    initial break_lm_scale = $test$plusargs("fabric_break_lm_scale") != 0;
`endif

    localparam [1:0] P_IDLE = 2'd0, P_SCALES = 2'd1, P_WEIGHTS = 2'd2, P_DRAIN = 2'd3;
    localparam integer SROWS = 1 << SA;

    reg [1:0]    phase;
    reg [SA-1:0] nrows;
    reg [15:0]   kbeats;                  // beats a row
    reg [1:0]    vmode;
    reg [VSA-1:0] vdst;
    reg [LANES-1:0] vmask;

    // ---- the scales: a word a cycle from the held beat ----------------------
    reg [31:0]   sbuf [0:SROWS-1];
    reg [DW-1:0] sbeat;
    reg [7:0]    sn;                      // words of sbeat still to write
    reg [SA-1:0] si;                      // the next row's scale
    wire         s_take_scales = phase == P_SCALES && (sn == 8'd0 || sn == 8'd1) &&
                                 {1'b0, si} + {{SA{1'b0}}, sn != 8'd0} < {1'b0, nrows};

    // ---- stage 0: a weight beat taken, its column group asked for -----------
    reg [15:0]   k;                       // the beat's column group in its row
    reg [SA-1:0] r;                       // its row
    reg          s1_v, s1_first, s1_last;
    reg [SA-1:0] s1_row;
    reg [DW-1:0] s1_w;
    // The scaler: busy from a row's hand-off until its last lane is fed.
    reg          sc_pre;                  // the row's scale is being read
    reg [LW:0]   sc_left;
    wire         sc_busy = sc_pre || sc_left != {(LW + 1){1'b0}};
    wire         k_last = k == kbeats - 16'd1;
    // A row's last beat waits while the scaler is still on the row before.
    wire         s_take_weights = phase == P_WEIGHTS && r < nrows &&
                                  !(k_last && (sc_busy || (s1_v && s1_last)));
    assign s_ready = s_take_scales || s_take_weights;
    wire         w_beat = s_valid && s_take_weights;
    assign q_addr = k[QA-1:0];

    // ---- stage 1: every lane's dot product of the beat ----------------------
    reg  signed [31:0] acc [0:LANES-1];
    reg  signed [31:0] sacc [0:LANES-1];
    reg  [SA-1:0]      srow;

    function signed [31:0] dot(input [DW-1:0] w, input [DW-1:0] q);
        integer j;
        reg signed [31:0] sum;
        begin
            sum = 32'sd0;
            for (j = 0; j < BPB; j = j + 1)
                sum = sum + $signed(w[8*j +: 8]) * $signed(q[8*j +: 8]);
            dot = sum;
        end
    endfunction

    // Two lanes' products of one weight byte in one multiplier: the lanes
    // share the weight, so w * (qa * 2^16 + qb) = w*qa * 2^16 + w*qb, and
    // |w*qb| <= 2^14 leaves w*qb exact in the low 16 bits (signed) and
    // w*qa in the bits above, less the low half's borrow. The packed
    // operand is 25 bits and the weight 8: one 25x18 DSP48E1 (or 27x18
    // DSP48E2) where two int8 products took two. Xilinx WP486 ("Deep
    // Learning with INT8 Optimization on Xilinx Devices") packs two int8
    // products on a shared weight the same way, 18 bits apart so that the
    // DSP can accumulate them; here each product leaves the DSP on its own
    // for the adder tree, so 16 bits apart suffice, and a 7-series slice's
    // 25-bit port holds them.
    function [63:0] dot2(input [DW-1:0] w, input [DW-1:0] qa, input [DW-1:0] qb);
        integer j;
        reg signed [24:0] pk;
        reg signed [32:0] p;
        reg signed [31:0] sa, sb;
        begin
            sa = 32'sd0;
            sb = 32'sd0;
            for (j = 0; j < BPB; j = j + 1) begin
                pk = $signed({qa[8*j +: 8], 16'd0}) + $signed({{17{qb[8*j+7]}}, qb[8*j +: 8]});
                p = $signed(w[8*j +: 8]) * pk;
                sb = sb + $signed({{16{p[15]}}, p[15:0]});
                sa = sa + $signed({{15{p[32]}}, p[32:16]}) + $signed({31'd0, p[15]});
            end
            dot2 = {sa, sb};
        end
    endfunction

    wire [32*LANES-1:0] ldot;             // every lane's dot product of s1_w
    genvar gp;
    generate
        for (gp = 0; gp + 1 < LANES; gp = gp + 2) begin : g_pair
            assign ldot[32*gp +: 64] = dot2(s1_w, q_data[DW*(gp+1) +: DW], q_data[DW*gp +: DW]);
        end
        if (LANES % 2 == 1) begin : g_odd
            assign ldot[32*(LANES-1) +: 32] = dot(s1_w, q_data[DW*(LANES-1) +: DW]);
        end
    endgenerate

    // ---- the scaler: a lane a cycle, three stages ---------------------------
    reg [31:0]         sc_scale;
    reg [LW-1:0]       sc_i;
    reg                a_v, b_v, c_v, d_v;
    reg [LW-1:0]       a_l, b_l, c_l, d_l;
    reg [SA-1:0]       a_row, b_row, c_row, d_row;
    reg signed [31:0]  a_acc;
    reg signed [63:0]  b_p;               // acc * scale
    reg signed [31:0]  c_x, d_x;          // what the residual holds (mode 1)
    reg signed [95:0]  c_p;               // acc * scale * m
    reg signed [63:0]  d_y;               // c_p rounded and saturated
    reg [31:0]         sb_q;
    always @(posedge clk)
        sb_q <= sbuf[srow];
    assign v_raddr = {a_l, vdst + {{(VSA - SA){1'b0}}, a_row}};

    function signed [31:0] sat32(input signed [63:0] v);
        sat32 = (v > 64'sh7FFF_FFFF) ? 32'sh7FFF_FFFF :
                (v < -64'sh8000_0000) ? -32'sh8000_0000 : v[31:0];
    endfunction
    // The rounding and saturation of the product take a stage of their
    // own (d), and the residual's sum and the logits' compare the next
    // (the write): each is a long carry chain.
    wire signed [95:0] c_r = (c_p + (96'sd1 <<< 36)) >>> 37;
    wire signed [63:0] c_y = (c_r > 96'sh7FFF_FFFF) ? 64'sh7FFF_FFFF :
                             (c_r < -96'sh8000_0000) ? -64'sh8000_0000 : c_r[63:0];
    wire signed [31:0] y = (vmode == 2'd1) ? sat32(d_y + {{32{d_x[31]}}, d_x}) : d_y[31:0];

    integer l;
    always @(posedge clk) begin
        done <= 1'b0;
        v_we <= 1'b0;
        if (cmd_valid && cmd_ready)
            cmd_valid <= 1'b0;
        if (rst) begin
            phase <= P_IDLE;
            cmd_valid <= 1'b0;
            s1_v <= 1'b0;
            sc_pre <= 1'b0;
            sc_left <= {(LW + 1){1'b0}};
            a_v <= 1'b0;
            b_v <= 1'b0;
            c_v <= 1'b0;
            d_v <= 1'b0;
        end else begin
            case (phase)
                P_IDLE: if (start) begin
                    nrows <= rows;
                    kbeats <= cols / BPB[15:0];
                    vmode <= mode;
                    vdst <= dst;
                    vmask <= mask;
                    si <= {SA{1'b0}};
                    sn <= 8'd0;
                    k <= 16'd0;
                    r <= {SA{1'b0}};
                    cmd_valid <= 1'b1;
                    cmd_addr <= addr;
                    cmd_words <= {{(24 - SA){1'b0}}, rows};
                    phase <= P_SCALES;
                end
                P_SCALES: begin
                    if (sn != 8'd0) begin
                        sbuf[si] <= sbeat[31:0];
                        sbeat <= sbeat >> 32;
                        sn <= sn - 8'd1;
                        si <= si + 1'b1;
                    end
                    if (s_valid && s_take_scales) begin
                        sbeat <= s_data;
                        sn <= WPB[7:0];
                    end
                    if (sn != 8'd0 && {1'b0, si} + 1'b1 == {1'b0, nrows}) begin
                        // The last scale is written: the weights next.
                        sn <= 8'd0;
                        cmd_valid <= 1'b1;
                        cmd_addr <= addr + ({{(AW - SA){1'b0}}, nrows} << 2);
                        cmd_words <= ({{(24 - SA){1'b0}}, nrows} * {8'd0, cols}) >> 2;
                        phase <= P_WEIGHTS;
                    end
                end
                P_WEIGHTS: if (r == nrows && !s1_v && !sc_busy && !a_v && !b_v && !c_v && !d_v)
                    phase <= P_DRAIN;
                P_DRAIN: begin
                    done <= 1'b1;
                    phase <= P_IDLE;
                end
            endcase

            // Stage 0.
            s1_v <= w_beat;
            if (w_beat) begin
                s1_w <= s_data;
                s1_first <= k == 16'd0;
                s1_last <= k_last;
                s1_row <= r;
                k <= k_last ? 16'd0 : k + 16'd1;
                if (k_last)
                    r <= r + 1'b1;
            end

            // Stage 1: the lanes' sums; a row's last hands them over.
            if (s1_v) begin
                for (l = 0; l < LANES; l = l + 1) begin
                    acc[l] <= (s1_first ? 32'sd0 : acc[l]) + $signed(ldot[32*l +: 32]);
                    if (s1_last)
                        sacc[l] <= (s1_first ? 32'sd0 : acc[l]) + $signed(ldot[32*l +: 32]);
                end
                if (s1_last) begin
                    srow <= s1_row;
                    sc_pre <= 1'b1;
                end
            end

            // The scaler: the row's scale read, then a lane a cycle.
            a_v <= 1'b0;
            if (sc_pre) begin
                sc_pre <= 1'b0;
                sc_left <= LANES[LW:0];
                sc_i <= {LW{1'b0}};
            end else if (sc_left != {(LW + 1){1'b0}}) begin
                if (sc_left == LANES[LW:0])
`ifdef FABRIC_MUTANTS
                    // Broken: the row's scale dropped, every row's step
                    // taken as 1.0.
                    sc_scale <= break_lm_scale ? 32'h4000_0000 : sb_q;
`else
                    sc_scale <= sb_q;
`endif
                a_v <= 1'b1;
                a_l <= sc_i;
                a_row <= srow;
                a_acc <= sacc[sc_i];
                sc_i <= sc_i + 1'b1;
                sc_left <= sc_left - 1'b1;
            end
            b_v <= a_v;
            b_l <= a_l;
            b_row <= a_row;
            b_p <= $signed({{32{a_acc[31]}}, a_acc}) * $signed({32'd0, sc_scale});
            c_v <= b_v;
            c_l <= b_l;
            c_row <= b_row;
            c_x <= v_rdata;             // read for stage a's lane
            c_p <= $signed({{32{b_p[63]}}, b_p}) * $signed({64'd0, m[32*b_l +: 32]});
            d_v <= c_v;
            d_l <= c_l;
            d_row <= c_row;
            d_x <= c_x;
            d_y <= c_y;
            if (d_v && vmask[d_l]) begin
                v_we <= 1'b1;
                v_waddr <= {d_l, vdst + {{(VSA - SA){1'b0}}, d_row}};
                v_wdata <= y;
                if (vmode == 2'd2 && (d_row == {SA{1'b0}} || y > $signed(best[32*d_l +: 32]))) begin
                    best[32*d_l +: 32] <= y;
                    best_row[SA*d_l +: SA] <= d_row;
                end
            end
        end
    end
endmodule

`default_nettype wire
