// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_dma: the shell's AXI4 master on the PS's HP port, one transfer at a
// time: a burst read of 1..16 words (each word handed out as it arrives), or
// a burst write of 1..16 words taken from a 16-word buffer. 32-bit data,
// INCR bursts, one ID; every burst the shell asks for is naturally aligned
// or a single word, so none crosses a 4 KiB boundary. A response other than
// OKAY (a decode error for an address outside the DDR) is reported with
// `done` as `err`.

`default_nettype none

module fabric_dma #(
    parameter integer AW = 40
) (
    input  wire          clk,
    input  wire          rst,

    input  wire          cmd_valid,
    output wire          cmd_ready,
    input  wire          cmd_write,
    input  wire [AW-1:0] cmd_addr,
    input  wire [4:0]    cmd_words,     // 1..16
    input  wire [511:0]  cmd_wdata,     // word i at [32*i +: 32]
    output reg           rd_valid,
    output reg  [31:0]   rd_data,
    output reg  [3:0]    rd_index,
    output reg           done,
    output reg           err,

    output reg  [AW-1:0] m_araddr,
    output reg  [7:0]    m_arlen,
    output wire [2:0]    m_arsize,
    output wire [1:0]    m_arburst,
    output reg           m_arvalid,
    input  wire          m_arready,
    input  wire [31:0]   m_rdata,
    input  wire [1:0]    m_rresp,
    input  wire          m_rlast,
    input  wire          m_rvalid,
    output wire          m_rready,

    output reg  [AW-1:0] m_awaddr,
    output reg  [7:0]    m_awlen,
    output wire [2:0]    m_awsize,
    output wire [1:0]    m_awburst,
    output reg           m_awvalid,
    input  wire          m_awready,
    output wire [31:0]   m_wdata,
    output wire [3:0]    m_wstrb,
    output wire          m_wlast,
    output reg           m_wvalid,
    input  wire          m_wready,
    input  wire [1:0]    m_bresp,
    input  wire          m_bvalid,
    output wire          m_bready
);
    assign m_arsize = 3'd2;
    assign m_awsize = 3'd2;
    assign m_arburst = 2'b01;
    assign m_awburst = 2'b01;
    assign m_rready = 1'b1;
    assign m_bready = 1'b1;
    assign m_wstrb = 4'hF;

    localparam [2:0] IDLE = 3'd0, READ = 3'd1, WRITE = 3'd2, WRESP = 3'd3;
    reg [2:0]   state;
    reg [511:0] wbuf;
    reg [4:0]   wcount;   // words of the write still to send
    reg [3:0]   windex;
    reg         aw_done;
    reg         bad;

    assign cmd_ready = (state == IDLE) && !done;
    assign m_wdata = wbuf[32 * windex +: 32];
    assign m_wlast = (wcount == 5'd1);

    always @(posedge clk) begin
        rd_valid <= 1'b0;
        done <= 1'b0;
        if (rst) begin
            state <= IDLE;
            m_arvalid <= 1'b0;
            m_awvalid <= 1'b0;
            m_wvalid <= 1'b0;
            err <= 1'b0;
        end else begin
            case (state)
                IDLE: begin
                    if (cmd_valid && !done) begin
                        bad <= 1'b0;
                        if (cmd_write) begin
                            m_awaddr <= cmd_addr;
                            m_awlen <= {3'd0, cmd_words - 5'd1};
                            m_awvalid <= 1'b1;
                            aw_done <= 1'b0;
                            wbuf <= cmd_wdata;
                            wcount <= cmd_words;
                            windex <= 4'd0;
                            m_wvalid <= 1'b1;
                            state <= WRITE;
                        end else begin
                            m_araddr <= cmd_addr;
                            m_arlen <= {3'd0, cmd_words - 5'd1};
                            m_arvalid <= 1'b1;
                            rd_index <= 4'd15;  // the first word arrives as 0
                            state <= READ;
                        end
                    end
                end
                READ: begin
                    if (m_arvalid && m_arready)
                        m_arvalid <= 1'b0;
                    if (m_rvalid) begin
                        rd_valid <= 1'b1;
                        rd_data <= m_rdata;
                        rd_index <= rd_index + 4'd1;
                        if (m_rresp != 2'b00)
                            bad <= 1'b1;
                        if (m_rlast) begin
                            done <= 1'b1;
                            err <= bad || (m_rresp != 2'b00);
                            state <= IDLE;
                        end
                    end
                end
                WRITE: begin
                    if (m_awvalid && m_awready) begin
                        m_awvalid <= 1'b0;
                        aw_done <= 1'b1;
                    end
                    if (m_wvalid && m_wready) begin
                        wcount <= wcount - 5'd1;
                        windex <= windex + 4'd1;
                        if (wcount == 5'd1)
                            m_wvalid <= 1'b0;
                    end
                    if ((aw_done || (m_awvalid && m_awready)) &&
                        (wcount == 5'd0 || (wcount == 5'd1 && m_wvalid && m_wready)))
                        state <= WRESP;
                end
                default: begin
                    if (m_bvalid) begin
                        done <= 1'b1;
                        err <= (m_bresp != 2'b00);
                        state <= IDLE;
                    end
                end
            endcase
        end
    end
endmodule

`default_nettype wire
