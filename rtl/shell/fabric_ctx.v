// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_ctx: one slot's decode contexts (docs/fabric-contract.md section
// 3): what each holds of its request, written by the ring fetch when it is
// accepted, by the step port after each token, and freed by the step port
// or by fabric_end when it is over. The parts write disjoint contexts: the
// fetch only a free one, the step port only the one it holds, fabric_end
// never that one.
//
// Each context's next draw is ready before its step: SplitMix64 runs here,
// twelve cycles deep, on any context whose draw was taken (or that was just
// accepted), and the step port finds the draw waiting. A result that comes
// back for a context freed or reused meanwhile is dropped (the generation
// it was asked for no longer matches).
//
// A cancel is seen a cycle late: `hit` is registered (CTX_CANCEL equal to
// the context's tag), which the scheduler reads.

`default_nettype none

module fabric_ctx #(
    parameter integer CPS = 8,
    parameter integer DAW = 40,
    // Derived from the parameters above: leave them be.
    parameter integer LW = (CPS > 1) ? $clog2(CPS) : 1
) (
    input  wire              clk,
    input  wire              rst,
    input  wire              flush,

    // A request accepted (fabric_fetch).
    input  wire              al_valid,
    input  wire [LW-1:0]     al_idx,
    input  wire [31:0]       al_tag,
    input  wire [31:0]       al_a,
    input  wire [31:0]       al_b,
    input  wire [63:0]       al_seed,
    input  wire              al_greedy,
    input  wire [19:0]       al_inv_t,
    input  wire [15:0]       al_max,
    input  wire [31:0]       al_stop,
    input  wire [DAW-1:0]    al_out,
    input  wire              al_stream,
    input  wire [31:0]       al_us,
    input  wire [DAW-1:0]    al_prompt,
    input  wire [15:0]       al_len,

    // A lane given (fabric_sched).
    input  wire              gr_valid,
    input  wire [LW-1:0]     gr_idx,
    // A step taken, its draw used (fabric_step).
    input  wire              tk_valid,
    input  wire [LW-1:0]     tk_idx,
    // A token written (fabric_step).
    input  wire              up_valid,
    input  wire [LW-1:0]     up_idx,
    input  wire [31:0]       up_token,
    input  wire [31:0]       up_crc,
    input  wire [15:0]       up_produced,
    // Requests over (fabric_step, fabric_end).
    input  wire              fr_step,
    input  wire [LW-1:0]     fr_step_idx,
    input  wire              fr_end,
    input  wire [LW-1:0]     fr_end_idx,

    input  wire [CPS*32-1:0] cancel,

    output reg  [CPS-1:0]    busy,
    output reg  [CPS-1:0]    run,
    output reg  [CPS-1:0]    draw_ok,
    output reg  [CPS-1:0]    hit,

    // The step port's context.
    input  wire [LW-1:0]     rd_idx,
    output wire [31:0]       rd_tag,
    output wire [31:0]       rd_a,
    output wire [31:0]       rd_b,
    output wire [31:0]       rd_draw,
    output wire              rd_greedy,
    output wire [19:0]       rd_inv_t,
    output wire [15:0]       rd_produced,
    output wire [15:0]       rd_max,
    output wire [31:0]       rd_stop,
    output wire [DAW-1:0]    rd_out,
    output wire [31:0]       rd_crc,
    output wire              rd_stream,
    output wire [31:0]       rd_us,
    output wire              rd_first,
    output wire [DAW-1:0]    rd_prompt,
    output wire [15:0]       rd_len,
    // fabric_end's context.
    input  wire [LW-1:0]     en_idx,
    output wire [31:0]       en_tag,
    output wire [31:0]       en_crc,
    output wire [15:0]       en_produced,
    output wire [31:0]       en_us
);

`ifdef FABRIC_MUTANTS
    // Broken on purpose where the co-simulation is started with
    // +fabric_break_<name> (scripts/rtl-mutants); FABRIC_MUTANTS is defined
    // only for that build, never for a design synthesized.
    reg break_cancel;
    initial break_cancel = $test$plusargs("fabric_break_cancel") != 0;
`endif

    reg [31:0]    tag      [0:CPS-1];
    reg [31:0]    a        [0:CPS-1];
    reg [31:0]    b        [0:CPS-1];
    reg [63:0]    rng      [0:CPS-1];
    reg [31:0]    draw     [0:CPS-1];
    reg [1:0]     gen      [0:CPS-1];
    reg           greedy   [0:CPS-1];
    reg [19:0]    inv_t    [0:CPS-1];
    reg [15:0]    produced [0:CPS-1];
    reg [15:0]    max      [0:CPS-1];
    reg [31:0]    stop     [0:CPS-1];
    reg [DAW-1:0] out      [0:CPS-1];
    reg [31:0]    crc      [0:CPS-1];
    reg [31:0]    start_us [0:CPS-1];
    reg           stream   [0:CPS-1];
    reg [DAW-1:0] prompt   [0:CPS-1];
    reg [15:0]    len      [0:CPS-1];
    reg [CPS-1:0] first_step;
    reg [CPS-1:0] in_pipe;

    assign rd_tag = tag[rd_idx];
    assign rd_a = a[rd_idx];
    assign rd_b = b[rd_idx];
    assign rd_draw = draw[rd_idx];
    assign rd_greedy = greedy[rd_idx];
    assign rd_inv_t = inv_t[rd_idx];
    assign rd_produced = produced[rd_idx];
    assign rd_max = max[rd_idx];
    assign rd_stop = stop[rd_idx];
    assign rd_out = out[rd_idx];
    assign rd_crc = crc[rd_idx];
    assign rd_stream = stream[rd_idx];
    assign rd_us = start_us[rd_idx];
    assign rd_first = first_step[rd_idx];
    assign rd_prompt = prompt[rd_idx];
    assign rd_len = len[rd_idx];
    assign en_tag = tag[en_idx];
    assign en_crc = crc[en_idx];
    assign en_produced = produced[en_idx];
    assign en_us = start_us[en_idx];

    // ---- the draws -------------------------------------------------------------
    // The first context waiting for a draw, registered; pushed next cycle if
    // it still waits.
    wire [CPS-1:0] want = busy & ~draw_ok & ~in_pipe;
    function [LW:0] first(input [CPS-1:0] v);
        integer k;
        begin
            first = {1'b0, {LW{1'b0}}};
            for (k = CPS - 1; k >= 0; k = k - 1)
                if (v[k])
                    first = {1'b1, k[LW-1:0]};
        end
    endfunction
    reg [LW:0] next_q;
    wire       mix_in = next_q[LW] && want[next_q[LW-1:0]] && !flush;
    wire [LW-1:0] mix_idx = next_q[LW-1:0];

    wire          mx_valid;
    wire [63:0]   mx_state;
    wire [31:0]   mx_draw;
    wire [LW+1:0] mx_tag;
    wire [LW-1:0] mx_idx = mx_tag[LW-1:0];
    wire [1:0]    mx_gen = mx_tag[LW+1:LW];
    fabric_splitmix #(.TW(LW + 2)) mix (
        .clk(clk), .in_valid(mix_in), .in_state(rng[mix_idx]),
        .in_tag({gen[mix_idx], mix_idx}),
        .out_valid(mx_valid), .out_state(mx_state), .out_draw(mx_draw), .out_tag(mx_tag)
    );
    wire mx_keep = mx_valid && in_pipe[mx_idx] && gen[mx_idx] == mx_gen &&
                   !(al_valid && al_idx == mx_idx);

    // ---- cancels ---------------------------------------------------------------
    integer k;
    always @(posedge clk)
        for (k = 0; k < CPS; k = k + 1)
`ifdef FABRIC_MUTANTS
            // Broken: CTX_CANCEL ignored.
            hit[k] <= !break_cancel && busy[k] && cancel[32 * k +: 32] == tag[k];
`else
            hit[k] <= busy[k] && cancel[32 * k +: 32] == tag[k];
`endif

    // ---- the table -------------------------------------------------------------
    // Per context, in this order of precedence: accepted (only a free one);
    // freed or given a lane; its draw taken or delivered; its token.
    integer i;
    always @(posedge clk) begin
        next_q <= first(want);
        if (rst || flush) begin
            busy <= {CPS{1'b0}};
            run <= {CPS{1'b0}};
            draw_ok <= {CPS{1'b0}};
            in_pipe <= {CPS{1'b0}};
            next_q <= {1'b0, {LW{1'b0}}};
            for (i = 0; i < CPS; i = i + 1)
                gen[i] <= 2'd0;
        end else begin
            for (i = 0; i < CPS; i = i + 1) begin
                if (al_valid && al_idx == i[LW-1:0]) begin
                    busy[i] <= 1'b1;
                    run[i] <= 1'b0;
                    draw_ok[i] <= 1'b0;
                    in_pipe[i] <= 1'b0;
                    gen[i] <= gen[i] + 2'd1;
                    tag[i] <= al_tag;
                    a[i] <= al_a;
                    b[i] <= al_b;
                    rng[i] <= al_seed;
                    greedy[i] <= al_greedy;
                    inv_t[i] <= al_inv_t;
                    produced[i] <= 16'd0;
                    max[i] <= al_max;
                    stop[i] <= al_stop;
                    out[i] <= al_out;
                    crc[i] <= 32'hFFFF_FFFF;
                    start_us[i] <= al_us;
                    stream[i] <= al_stream;
                    prompt[i] <= al_prompt;
                    len[i] <= al_len;
                    first_step[i] <= 1'b1;
                end else begin
                    if ((fr_step && fr_step_idx == i[LW-1:0]) ||
                        (fr_end && fr_end_idx == i[LW-1:0])) begin
                        busy[i] <= 1'b0;
                        run[i] <= 1'b0;
                    end else if (gr_valid && gr_idx == i[LW-1:0]) begin
                        run[i] <= 1'b1;
                    end
                    if (tk_valid && tk_idx == i[LW-1:0]) begin
                        draw_ok[i] <= 1'b0;
                        first_step[i] <= 1'b0;
                    end else if (mx_keep && mx_idx == i[LW-1:0]) begin
                        rng[i] <= mx_state;
                        draw[i] <= mx_draw;
                        draw_ok[i] <= 1'b1;
                    end
                    if (mix_in && mix_idx == i[LW-1:0])
                        in_pipe[i] <= 1'b1;
                    else if (mx_keep && mx_idx == i[LW-1:0])
                        in_pipe[i] <= 1'b0;
                    if (up_valid && up_idx == i[LW-1:0]) begin
                        a[i] <= b[i];
                        b[i] <= up_token;
                        crc[i] <= up_crc;
                        produced[i] <= up_produced;
                    end
                end
            end
        end
    end
endmodule

`default_nettype wire
