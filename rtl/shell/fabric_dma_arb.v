// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_dma_arb: the shell's parts that touch DDR (the completion queue,
// each slot's step port, the ring fetch) share the HP port's master
// (fabric_dma), one transfer at a time, taken in turn (round robin from the
// client after the last one served). A client holds cmd_valid until
// cmd_ready; the transfer's words and its done (with err) come back to it
// alone.

`default_nettype none

module fabric_dma_arb #(
    parameter integer N = 4,
    parameter integer AW = 40
) (
    input  wire            clk,
    input  wire            rst,

    input  wire [N-1:0]    cmd_valid,
    output reg  [N-1:0]    cmd_ready,
    input  wire [N-1:0]    cmd_write,
    input  wire [N*AW-1:0] cmd_addr,
    input  wire [N*5-1:0]  cmd_words,
    input  wire [N*256-1:0] cmd_wdata,
    output reg  [N-1:0]    rd_valid,
    output wire [31:0]     rd_data,
    output wire [3:0]      rd_index,
    output reg  [N-1:0]    done,
    output wire            err,

    // fabric_dma's command side.
    output reg             dma_valid,
    input  wire            dma_ready,
    output reg             dma_write,
    output reg  [AW-1:0]   dma_addr,
    output reg  [4:0]      dma_words,
    output reg  [255:0]    dma_wdata,
    input  wire            dma_rd_valid,
    input  wire [31:0]     dma_rd_data,
    input  wire [3:0]      dma_rd_index,
    input  wire            dma_done,
    input  wire            dma_err
);
    localparam integer IW = (N > 1) ? $clog2(N) : 1;

    reg [IW-1:0] owner;
    reg          busy;

    // The first requester after `owner`, in turn.
    function [IW:0] next(input [N-1:0] req, input [IW-1:0] last);
        integer k;
        reg [IW:0] c;
        begin
            next = {1'b0, {IW{1'b0}}};
            for (k = N; k >= 1; k = k - 1) begin
                c = {1'b0, last} + k[IW:0];
                if (c >= N[IW:0])
                    c = c - N[IW:0];
                if (req[c[IW-1:0]])
                    next = {1'b1, c[IW-1:0]};
            end
        end
    endfunction

    wire [IW:0] pick = next(cmd_valid, owner);

    assign rd_data = dma_rd_data;
    assign rd_index = dma_rd_index;
    assign err = dma_err;

    integer k;
    always @(*) begin
        for (k = 0; k < N; k = k + 1) begin
            rd_valid[k] = busy && owner == k[IW-1:0] && dma_rd_valid;
            done[k] = busy && owner == k[IW-1:0] && dma_done;
        end
    end

    always @(posedge clk) begin
        cmd_ready <= {N{1'b0}};
        if (rst) begin
            busy <= 1'b0;
            dma_valid <= 1'b0;
            owner <= {IW{1'b0}};
        end else if (!busy) begin
            if (pick[IW] && !cmd_ready[pick[IW-1:0]]) begin
                owner <= pick[IW-1:0];
                busy <= 1'b1;
                cmd_ready[pick[IW-1:0]] <= 1'b1;
                dma_valid <= 1'b1;
                dma_write <= cmd_write[pick[IW-1:0]];
                dma_addr <= cmd_addr[AW * pick[IW-1:0] +: AW];
                dma_words <= cmd_words[5 * pick[IW-1:0] +: 5];
                dma_wdata <= cmd_wdata[256 * pick[IW-1:0] +: 256];
            end
        end else begin
            if (dma_valid && dma_ready)
                dma_valid <= 1'b0;
            if (dma_done)
                busy <= 1'b0;
        end
    end
endmodule

`default_nettype wire
