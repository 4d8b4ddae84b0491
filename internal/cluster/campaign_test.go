package cluster

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

var (
	campaignFaults  = flag.Int("campaign.faults", 12, "faults the campaign injects (the long run: 500)")
	campaignVerbose = flag.Bool("campaign.v", false, "log every failed write of the campaign")
	campaignSeed    = flag.Uint64("campaign.seed", 0, "the campaign's random seed (0: from the time)")
)

// TestCampaign injects faults at random while a writer writes and
// verifies files: a chunkserver stopped and restarted (one down at a
// time), the master restarted, a byte flipped in a replica (once per
// chunk). At the end every acknowledged file
// reads back intact, every chunk has its full replication, and fsck finds
// nothing missing.
func TestCampaign(t *testing.T) {
	c, cl, log, _ := startHeal(t, 5, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(*campaignFaults)*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seed := rng.Uint64()
	if *campaignSeed != 0 {
		seed = *campaignSeed
	}
	t.Logf("seed %d", seed)
	rng = rand.New(rand.NewPCG(seed, 7))

	var mu sync.Mutex // guards acked
	acked := map[string][]byte{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/c%04d", i)
			data := healBytes(uint64(i)+seed, 1+int((seed+uint64(i)*7919)%(3*healChunk)))
			f, err := cl.Create(ctx, p)
			if err == nil {
				_, err = f.Write(data)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err == nil {
				mu.Lock()
				acked[p] = data
				mu.Unlock()
			} else {
				if *campaignVerbose {
					t.Logf("%s: %v", p, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()

	down := -1
	faults := map[string]int{}
	flipped := map[chunkfs.Handle]bool{}
	for range *campaignFaults {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		switch k := rng.IntN(4); {
		case k == 0 && down < 0:
			down = rng.IntN(c.Chunkservers())
			if err := c.StopChunkserver(down); err != nil {
				t.Fatal(err)
			}
			faults["stop chunkserver"]++
		case k <= 1 && down >= 0:
			if err := c.RestartChunkserver(down); err != nil {
				t.Fatal(err)
			}
			down = -1
			faults["restart chunkserver"]++
		case k == 2:
			if err := c.RestartMaster(); err != nil {
				t.Fatal(err)
			}
			faults["restart master"]++
		default:
			if corruptOne(ctx, c, cl, &mu, acked, flipped, rng, down) {
				faults["flip a byte"]++
			}
		}
	}
	close(stop)
	wg.Wait()
	if down >= 0 {
		if err := c.RestartChunkserver(down); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitAlive(ctx, c.Chunkservers()); err != nil {
		t.Fatal(err)
	}
	// Every acknowledged byte reads back (reads also find flipped bytes,
	// which then get replaced).
	var bytesChecked int64
	for p, want := range acked {
		got, err := get(ctx, cl, p)
		if err != nil || !bytes.Equal(got, want) {
			chunks, cerr := cl.Chunks(ctx, p)
			for _, ch := range chunks {
				var on []int
				for i := range c.Chunkservers() {
					if c.HasReplica(i, chunkfs.Handle(ch.Handle)) {
						on = append(on, i)
					}
				}
				t.Logf("%s chunk %d: handle %d version %d replicas %v; files on servers %v", p, ch.Index, ch.Handle, ch.Version, ch.Replicas, on)
			}
			time.Sleep(5 * time.Second)
			got2, err2 := get(ctx, cl, p)
			t.Fatalf("%s: acknowledged %d bytes, read %d (%v) (chunks: %v); 5 s later: %d bytes, %v", p, len(want), len(got), err, cerr, len(got2), err2)
		}
		bytesChecked += int64(len(got))
	}
	// Healing gets a budget of its own, whatever the faults and the reads
	// took on a loaded machine: a lease a chunkserver holds (adopted after
	// a master restart) keeps its chunk from being cloned until it ends.
	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Minute+2*chunkfs.LeaseDuration)
	defer hcancel()
	r := waitHealed(t, hctx, cl)
	if r.Missing != 0 {
		t.Fatalf("fsck: %d missing", r.Missing)
	}
	clones := 0
	for _, e := range log.all() {
		if e.Done && e.Err == nil {
			clones++
		}
	}
	t.Logf("faults %v; %d files (%d bytes) verified; %d clones; fsck: %d chunks healthy", faults, len(acked), bytesChecked, clones, r.Healthy)
}

// corruptOne flips a byte of one replica of an acknowledged file's first
// chunk, on a running server, and reports whether it did.
//
// Each chunk is flipped at most once: a second flip in another replica
// before a read or the scrubber finds the first would be a second failure
// of the chunk, which R = 3 with one server down at a time does not
// promise to survive.
func corruptOne(ctx context.Context, c *Cluster, cl *client.Client, mu *sync.Mutex, acked map[string][]byte, flipped map[chunkfs.Handle]bool, rng *rand.Rand, down int) bool {
	mu.Lock()
	var paths []string
	for p := range acked {
		paths = append(paths, p)
	}
	mu.Unlock()
	if len(paths) == 0 {
		return false
	}
	slices.Sort(paths)
	p := paths[rng.IntN(len(paths))]
	chunks, err := cl.Chunks(ctx, p)
	if err != nil || len(chunks) == 0 || len(chunks[0].Replicas) < 3 || flipped[chunkfs.Handle(chunks[0].Handle)] {
		return false // not while the chunk is short of replicas, nor twice
	}
	flipped[chunkfs.Handle(chunks[0].Handle)] = true
	i := serverIndex(c, chunks[0].Replicas[rng.IntN(len(chunks[0].Replicas))])
	if i < 0 || i == down {
		return false
	}
	mu.Lock()
	n := len(acked[p])
	mu.Unlock()
	return c.CorruptReplica(i, chunkfs.Handle(chunks[0].Handle), int64(rng.IntN(min(n, healChunk)))) == nil
}
