// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fabric_slot: what a PR slot holds: a model's table in block RAM (or
// UltraRAM), initialised from TABLE_HEX (written by `mktable` from a model
// image), and the engine that decodes from it. Each model is one
// reconfigurable module: this module synthesised with another table. The
// slot comes out of reset after every load (RESET_AFTER_RECONFIG, and the
// shell's reload), and the engine reads its table's header.
//
// Its side of the partition boundary is registered: a register slice on
// the step's channel in and on the answer's channel out, and `present`, a
// constant 1 that a greybox (no module) leaves at 0.

`default_nettype none

module fabric_slot #(
    parameter TABLE_HEX = "",
    parameter integer TABLE_WORDS = 1024,
    parameter integer AW = 20,
    // Derived from the parameters above: leave them be.
    parameter integer TW = (TABLE_WORDS > 1) ? $clog2(TABLE_WORDS) : 1,
    parameter integer REQ_W = 117,
    parameter integer RSP_W = 33
) (
    input  wire             clk,
    input  wire             rst,

    input  wire             req_valid,
    output wire             req_ready,
    input  wire [REQ_W-1:0] req_data,    // a, b, draw, greedy, inv_t
    output wire             rsp_valid,
    input  wire             rsp_ready,
    output wire [RSP_W-1:0] rsp_data,    // token, fault
    output wire             present,
    output wire             table_done,
    output wire             table_ok,
    output wire [255:0]     identity
);
    reg [31:0] table_mem [0:TABLE_WORDS-1];
    reg [31:0] mem_q;
    wire [AW-1:0] mem_addr;

    initial begin
        if (TABLE_HEX != "")
            $readmemh(TABLE_HEX, table_mem);
    end

`ifdef VERILATOR
    // The co-simulation writes a table here as a partial load would: the
    // configuration port, not a port of the design.
    export "DPI-C" function fabric_table_write;
    function void fabric_table_write(input int addr, input int data);
        if (addr >= 0 && addr < TABLE_WORDS)
            table_mem[addr] = data;
    endfunction
`endif

    // The engine registers the address (its mem_addr is a flip-flop), so
    // this is a synchronous read: block RAM's, with the address register
    // merged into the RAM when synthesis flattens the slot.
    always @(*)
        mem_q = ({{(32 - AW){1'b0}}, mem_addr} < TABLE_WORDS) ? table_mem[mem_addr[TW-1:0]] : 32'd0;

    assign present = 1'b1;

    wire             e_req_valid, e_req_ready, e_rsp_valid, e_rsp_ready, e_rsp_fault;
    wire [REQ_W-1:0] e_req;
    wire [31:0]      e_rsp_token;

    fabric_skid #(.W(REQ_W)) req_in (
        .clk(clk), .rst(rst),
        .s_valid(req_valid), .s_ready(req_ready), .s_data(req_data),
        .m_valid(e_req_valid), .m_ready(e_req_ready), .m_data(e_req)
    );

    fabric_skid #(.W(RSP_W)) rsp_out (
        .clk(clk), .rst(rst),
        .s_valid(e_rsp_valid), .s_ready(e_rsp_ready), .s_data({e_rsp_token, e_rsp_fault}),
        .m_valid(rsp_valid), .m_ready(rsp_ready), .m_data(rsp_data)
    );

    fabric_engine #(.AW(AW)) engine (
        .clk(clk), .rst(rst),
        .table_done(table_done), .table_ok(table_ok), .identity(identity),
        .req_valid(e_req_valid), .req_ready(e_req_ready),
        .req_a(e_req[116:85]), .req_b(e_req[84:53]), .req_draw(e_req[52:21]),
        .req_greedy(e_req[20]), .req_inv_t(e_req[19:0]),
        .rsp_valid(e_rsp_valid), .rsp_ready(e_rsp_ready),
        .rsp_token(e_rsp_token), .rsp_fault(e_rsp_fault),
        .mem_addr(mem_addr), .mem_data(mem_q)
    );
endmodule

`default_nettype wire
