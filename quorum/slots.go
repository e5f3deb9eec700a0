package quorum

import (
	"strconv"
	"strings"
	"sync"
)

// Hash slots: how a master that is a Redis Cluster (see shards.go) finds
// the keys a script may touch. A Redis Cluster runs a script only when
// every key it names lies in one hash slot, and a name's keys share the
// hash tag {name}, so they do; the epoch marker beside them must too. So
// such a master keeps one marker per slot, whose key carries a hash tag
// of that slot (slotTags), and a call's marker is the one of its name's
// slot.

// numSlots is how many hash slots a Redis Cluster has.
const numSlots = 16384

// slotOf is the hash slot of key, by the Redis Cluster rule: CRC16 of its
// hash tag (what lies between its first '{' and the first '}' after it,
// when that is not empty), else of the whole key, modulo 16384.
func slotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key)) % numSlots
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

// slotTags are, for each hash slot, the first decimal number whose slot it
// is: the hash tag of that slot's marker. Every agent computes the same.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, numSlots)
	left := numSlots
	for i := 0; left > 0; i++ {
		tag := strconv.Itoa(i)
		if s := slotOf(tag); tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return tags
})

// callSlot is the slot of a call's keys on a master that is a Redis
// Cluster (they share one; the generic marker key aside), and keys with
// the generic marker key replaced by that slot's marker. A call of slot
// markers alone is the slot of its first; a call of the generic marker
// alone has no slot (-1): no script may run so on a cluster master.
func (c *Cluster) callSlot(keys []string) (slot int, out []string) {
	generic := c.markerKey()
	marker := -1
	slot = -1
	for i, k := range keys {
		switch {
		case k == generic:
			marker = i
		case slot < 0:
			slot = slotOf(k)
		}
	}
	if slot < 0 || marker < 0 {
		return slot, keys
	}
	out = make([]string, len(keys))
	copy(out, keys)
	out[marker] = c.slotMarkerKey(slot)
	return slot, out
}

// slotRanges writes slots (ascending) as "0-5460,6000".
func slotRanges(slots []int) string {
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
