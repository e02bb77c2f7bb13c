// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), as crc32fast
// computes it: `crc` is the running register (start at 32'hFFFFFFFF, the
// result is its complement), `word` four bytes in little-endian order.
function [31:0] crc32_word(input [31:0] crc, input [31:0] word);
    integer k;
    reg [31:0] c;
    begin
        c = crc ^ word;
        for (k = 0; k < 32; k = k + 1)
            c = c[0] ? ((c >> 1) ^ 32'hEDB8_8320) : (c >> 1);
        crc32_word = c;
    end
endfunction
