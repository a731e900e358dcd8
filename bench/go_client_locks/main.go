// Lock-cycle load driver for bench/go_client_locks.sh: CLIENTS goroutines sharing one client each run
// acquire+release cycles on random keys for SECONDS, one request in flight per goroutine.
//
//	ruvio: the Ruvio Go client (clients/go):  Lease(key, ttl) -> token; Release(key, token)
//	redis: go-redis v9:                       SET key token NX PX ttl -> OK; EVALSHA <compare-and-delete> 1 key token
//
// Prints one line of key=value fields: cycles, cycles_per_sec, refused, p50_us, p99_us, p999_us.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	ruvio "github.com/ruvio/ruvio/clients/go"
)

const compareAndDelete = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`

func main() {
	mode := flag.String("mode", "ruvio", "ruvio or redis")
	addr := flag.String("addr", "127.0.0.1:6379", "server address")
	clients := flag.Int("clients", 50, "concurrent callers")
	keys := flag.Int("keys", 10000, "key space")
	seconds := flag.Float64("seconds", 10, "duration")
	ttl := flag.Duration("ttl", 10*time.Second, "lock TTL")
	flag.Parse()
	ctx := context.Background()

	var cycle func(ctx context.Context, key string, id string) (bool, error)
	switch *mode {
	case "ruvio":
		c, err := ruvio.Connect(ctx, ruvio.Options{Addr: *addr, PoolSize: *clients})
		if err != nil {
			fail(err)
		}
		defer c.Close()
		cycle = func(ctx context.Context, key, _ string) (bool, error) {
			token, ok, err := c.Lease(ctx, key, *ttl)
			if err != nil || !ok {
				return false, err
			}
			_, err = c.Release(ctx, key, token)
			return true, err
		}
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *clients, Protocol: 3})
		defer c.Close()
		sha, err := c.ScriptLoad(ctx, compareAndDelete).Result()
		if err != nil {
			fail(err)
		}
		cycle = func(ctx context.Context, key, id string) (bool, error) {
			ok, err := c.SetNX(ctx, key, id, *ttl).Result()
			if err != nil || !ok {
				return false, err
			}
			return true, c.EvalSha(ctx, sha, []string{key}, id).Err()
		}
	default:
		fail(fmt.Errorf("unknown mode %q", *mode))
	}

	end := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	var wg sync.WaitGroup
	lat := make([][]time.Duration, *clients)
	refused := make([]int, *clients)
	errs := make(chan error, *clients)
	start := time.Now()
	for g := 0; g < *clients; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g) + 1))
			for n := 0; time.Now().Before(end); n++ {
				key := "bench:lock:" + strconv.Itoa(rng.Intn(*keys))
				t0 := time.Now()
				ok, err := cycle(ctx, key, strconv.Itoa(g)+":"+strconv.Itoa(n))
				if err != nil {
					errs <- err
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
				if !ok {
					refused[g]++
				}
			}
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		fail(err)
	}
	var all []time.Duration
	total := 0
	for g := range lat {
		all = append(all, lat[g]...)
		total += refused[g]
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) int64 {
		if len(all) == 0 {
			return 0
		}
		return all[int(p*float64(len(all)-1))].Microseconds()
	}
	fmt.Printf("cycles=%d cycles_per_sec=%.0f refused=%d p50_us=%d p99_us=%d p999_us=%d\n",
		len(all), float64(len(all))/elapsed.Seconds(), total, q(0.50), q(0.99), q(0.999))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "go_client_locks:", err)
	os.Exit(1)
}
