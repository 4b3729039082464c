package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/purecuda/cuda/nccl"
)

// options are the flags, with the torchrun environment variables as their
// defaults.
type options struct {
	rank, world, localRank, n int
	addr                      string // rank 0's host:port; "" for one process
	timeout                   time.Duration
}

// register defines the flags on fs, their defaults from getenv.
func (o *options) register(fs *flag.FlagSet, getenv func(string) string) {
	atoi := func(name string, def int) int {
		if v, err := strconv.Atoi(getenv(name)); err == nil {
			return v
		}
		return def
	}
	fs.IntVar(&o.rank, "rank", atoi("RANK", 0), "this process's rank (RANK)")
	fs.IntVar(&o.world, "world", atoi("WORLD_SIZE", 1), "the number of processes (WORLD_SIZE)")
	fs.IntVar(&o.localRank, "local-rank", atoi("LOCAL_RANK", atoi("RANK", 0)), "the GPU of this machine to use (LOCAL_RANK)")
	addr := ""
	if h, p := getenv("MASTER_ADDR"), getenv("MASTER_PORT"); h != "" || p != "" {
		if h == "" {
			h = "127.0.0.1"
		}
		if p == "" {
			p = "29500"
		}
		addr = net.JoinHostPort(h, p)
	}
	fs.StringVar(&o.addr, "addr", addr, "where rank 0 serves the NCCL unique ID, host:port (MASTER_ADDR, MASTER_PORT)")
	fs.IntVar(&o.n, "n", 1<<20, "elements to all-reduce")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the other ranks")
}

// check refuses inconsistent options.
func (o *options) check() error {
	switch {
	case o.world < 1:
		return fmt.Errorf("world size %d: want at least 1", o.world)
	case o.rank < 0 || o.rank >= o.world:
		return fmt.Errorf("rank %d of %d: want 0 <= rank < world size", o.rank, o.world)
	case o.localRank < 0:
		return fmt.Errorf("local rank %d: want a GPU ordinal", o.localRank)
	case o.n < 1:
		return fmt.Errorf("-n %d: want at least one element", o.n)
	case o.world > 1 && o.addr == "":
		return errors.New("several processes need rank 0's address: -addr or MASTER_ADDR and MASTER_PORT")
	}
	return nil
}

// rendezvous gives every rank the communicator's UniqueID: rank 0 makes
// it and serves it on o.addr until every other rank has fetched it (or
// stop is called); the others fetch it, retrying until ctx ends.
func rendezvous(ctx context.Context, o options) (id nccl.UniqueID, stop func(), err error) {
	if o.rank != 0 {
		id, err = fetchID(ctx, o.addr)
		return id, func() {}, err
	}
	if id, err = nccl.NewUniqueID(); err != nil {
		return id, nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		return id, nil, err
	}
	go serveID(ln, id, o.world-1)
	return id, func() { _ = ln.Close() }, nil
}

// serveID writes id, as text and a newline, to the first n connections to
// ln, then closes it.
func serveID(ln net.Listener, id nccl.UniqueID, n int) {
	defer ln.Close()
	text, err := id.MarshalText()
	if err != nil {
		return
	}
	text = append(text, '\n')
	for served := 0; served < n; {
		conn, err := ln.Accept()
		if err != nil {
			return // closed by stop
		}
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(text); err == nil {
			served++
		}
		_ = conn.Close()
	}
}

// fetchID reads the UniqueID rank 0 serves at addr, retrying while rank 0
// is not up yet, until ctx ends.
func fetchID(ctx context.Context, addr string) (nccl.UniqueID, error) {
	var id nccl.UniqueID
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if dl, ok := ctx.Deadline(); ok {
				_ = conn.SetReadDeadline(dl)
			}
			line, rerr := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close()
			if rerr != nil {
				return id, fmt.Errorf("reading the unique ID from %s: %w", addr, rerr)
			}
			return id, id.UnmarshalText([]byte(strings.TrimSpace(line)))
		}
		select {
		case <-ctx.Done():
			return id, fmt.Errorf("rank 0 at %s did not answer: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
