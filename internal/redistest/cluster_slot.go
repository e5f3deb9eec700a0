package redistest

import "strings"

// SlotOf is the hash slot of key, as Redis Cluster computes it: CRC16
// (XMODEM) of the key modulo 16384, or of its hash tag only when it has
// one, the text between its first "{" and the first "}" after it, if that
// text is not empty.
func SlotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if length := strings.IndexByte(key[open+1:], '}'); length > 0 {
			key = key[open+1 : open+1+length]
		}
	}
	return int(crc16(key) % SlotCount)
}

// crc16 is CRC-16/XMODEM: polynomial 0x1021, initial value 0, no
// reflection (the one in Redis's crc16.c).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
