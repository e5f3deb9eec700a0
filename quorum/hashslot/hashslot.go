// Package hashslot is the Redis Cluster rule for hash slots: how a master
// that is a Redis Cluster (see quorum/shards.go) finds the keys a script may
// touch. A Redis Cluster runs a script only when every key it names lies in
// one hash slot, and a name's keys share the hash tag {name}, so they do; the
// epoch marker beside them must too. So such a master keeps one marker per
// slot, whose key carries a hash tag of that slot (Tag), and a call's marker
// is the one of its name's slot (see keyspace.Prefix.CallSlot).
package hashslot

import (
	"strconv"
	"strings"
	"sync"
)

// Count is how many hash slots a Redis Cluster has.
const Count = 16384

// Of is the hash slot of key, by the Redis Cluster rule: CRC16 of its
// hash tag (what lies between its first '{' and the first '}' after it,
// when that is not empty), else of the whole key, modulo 16384.
func Of(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key)) % Count
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis
// Cluster hashes keys with.
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

// tags are, for each hash slot, the first decimal number whose slot it
// is: the hash tag of that slot's marker. Every agent computes the same.
var tags = sync.OnceValue(func() []string {
	tags := make([]string, Count)
	left := Count
	for i := 0; left > 0; i++ {
		tag := strconv.Itoa(i)
		if s := Of(tag); tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return tags
})

// Tag is the hash tag of slot's marker: the first decimal number whose slot
// it is. Every agent computes the same.
func Tag(slot int) string { return tags()[slot] }

// Ranges writes slots (ascending) as "0-5460,6000".
func Ranges(slots []int) string {
	var b strings.Builder
	for i := 0; i < len(slots); {
		j := i
		for j+1 < len(slots) && slots[j+1] == slots[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(slots[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(slots[j]))
		}
		i = j + 1
	}
	return b.String()
}
