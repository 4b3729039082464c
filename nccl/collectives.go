package nccl

import (
	"math"
	"unsafe"

	"github.com/purecuda/cuda/driver"
)

// The collectives and point-to-point operations. Each is queued on s
// (see the promises in the package documentation, "Operations"); every
// rank of the communicator must make the same collectives in the same
// order, with the same counts.

// AllReduce leaves in every rank's recv the reduction, element by element,
// of every rank's send (ncclAllReduce). send and recv have the same
// length; they may be the same buffer (in place).
func AllReduce[T any](c *Comm, s *driver.Stream, send, recv *driver.Buffer[T], op Op) error {
	const name = "AllReduce"
	o := operation{name: name, kind: opAllReduce}
	if err := setType[T](&o); err != nil {
		return err
	}
	if err := setRed(&o, op); err != nil {
		return err
	}
	if err := needBoth(name, send, recv); err != nil {
		return err
	}
	if send.Len() != recv.Len() {
		return invalid("%s: send has %d elements and recv %d: want equal lengths", name, send.Len(), recv.Len())
	}
	setSend(&o, send)
	setRecv(&o, recv)
	o.count = uintptr(recv.Len())
	return c.enqueue(s, &o)
}

// Broadcast copies root's send into every rank's recv (ncclBroadcast).
// Only the root reads send: other ranks pass nil. On the root send has
// recv's length, and may be recv (in place).
func Broadcast[T any](c *Comm, s *driver.Stream, send, recv *driver.Buffer[T], root int) error {
	const name = "Broadcast"
	o := operation{name: name, kind: opBroadcast}
	if err := setType[T](&o); err != nil {
		return err
	}
	if err := setRank(&o, c, root, "root"); err != nil {
		return err
	}
	if recv == nil {
		return invalid("%s: nil recv buffer", name)
	}
	if c.Rank() == root {
		if send == nil {
			return invalid("%s: the root needs a send buffer", name)
		}
		if send.Len() != recv.Len() {
			return invalid("%s: send has %d elements and recv %d: want equal lengths", name, send.Len(), recv.Len())
		}
		setSend(&o, send)
	}
	setRecv(&o, recv)
	o.count = uintptr(recv.Len())
	return c.enqueue(s, &o)
}

// Reduce leaves in root's recv the reduction of every rank's send
// (ncclReduce). Only the root writes recv: other ranks pass nil. On the
// root recv has send's length, and may be send (in place).
func Reduce[T any](c *Comm, s *driver.Stream, send, recv *driver.Buffer[T], op Op, root int) error {
	const name = "Reduce"
	o := operation{name: name, kind: opReduce}
	if err := setType[T](&o); err != nil {
		return err
	}
	if err := setRed(&o, op); err != nil {
		return err
	}
	if err := setRank(&o, c, root, "root"); err != nil {
		return err
	}
	if send == nil {
		return invalid("%s: nil send buffer", name)
	}
	if c.Rank() == root {
		if recv == nil {
			return invalid("%s: the root needs a recv buffer", name)
		}
		if send.Len() != recv.Len() {
			return invalid("%s: send has %d elements and recv %d: want equal lengths", name, send.Len(), recv.Len())
		}
		setRecv(&o, recv)
	}
	setSend(&o, send)
	o.count = uintptr(send.Len())
	return c.enqueue(s, &o)
}

// AllGather leaves in every rank's recv the send buffers of all ranks, in
// rank order: rank r's at elements [r*n, (r+1)*n), n = send.Len()
// (ncclAllGather). recv has c.Size()*n elements (the communicator's
// rank count times send's length).
func AllGather[T any](c *Comm, s *driver.Stream, send, recv *driver.Buffer[T]) error {
	const name = "AllGather"
	o := operation{name: name, kind: opAllGather}
	if err := setType[T](&o); err != nil {
		return err
	}
	if err := needBoth(name, send, recv); err != nil {
		return err
	}
	if n := c.Size(); n > 0 && recv.Len() != send.Len()*n {
		return invalid("%s: recv has %d elements: want %d ranks × %d (send's length)", name, recv.Len(), n, send.Len())
	}
	setSend(&o, send)
	setRecv(&o, recv)
	o.count = uintptr(send.Len())
	return c.enqueue(s, &o)
}

// ReduceScatter reduces every rank's send and leaves block r of the
// result in rank r's recv: elements [r*n, (r+1)*n), n = recv.Len()
// (ncclReduceScatter). send has c.Size()*n elements (the communicator's
// rank count times recv's length).
func ReduceScatter[T any](c *Comm, s *driver.Stream, send, recv *driver.Buffer[T], op Op) error {
	const name = "ReduceScatter"
	o := operation{name: name, kind: opReduceScatter}
	if err := setType[T](&o); err != nil {
		return err
	}
	if err := setRed(&o, op); err != nil {
		return err
	}
	if err := needBoth(name, send, recv); err != nil {
		return err
	}
	if n := c.Size(); n > 0 && send.Len() != recv.Len()*n {
		return invalid("%s: send has %d elements: want %d ranks × %d (recv's length)", name, send.Len(), n, recv.Len())
	}
	setSend(&o, send)
	setRecv(&o, recv)
	o.count = uintptr(recv.Len())
	return c.enqueue(s, &o)
}

// Send sends buf to rank peer, which receives it with Recv of the same
// length and type (ncclSend). A send and a receive between two ranks that
// each do both must be in one Group.
func Send[T any](c *Comm, s *driver.Stream, buf *driver.Buffer[T], peer int) error {
	return pointToPoint(c, s, buf, peer, operation{name: "Send", kind: opSend})
}

// Recv receives into buf what rank peer sends with Send (ncclRecv).
func Recv[T any](c *Comm, s *driver.Stream, buf *driver.Buffer[T], peer int) error {
	return pointToPoint(c, s, buf, peer, operation{name: "Recv", kind: opRecv})
}

// pointToPoint checks and queues o, a Send or Recv of buf with rank peer.
func pointToPoint[T any](c *Comm, s *driver.Stream, buf *driver.Buffer[T], peer int, o operation) error {
	if err := setType[T](&o); err != nil {
		return err
	}
	if err := setRank(&o, c, peer, "peer"); err != nil {
		return err
	}
	if buf == nil {
		return invalid("%s: nil buffer", o.name)
	}
	if o.kind == opSend {
		setSend(&o, buf)
	} else {
		setRecv(&o, buf)
	}
	o.count = uintptr(buf.Len())
	return c.enqueue(s, &o)
}

// setSend and setRecv name o's send and receive buffers (not nil).
func setSend[T any](o *operation, b *driver.Buffer[T]) { o.send, o.sendP = b, unsafe.Pointer(b) }
func setRecv[T any](o *operation, b *driver.Buffer[T]) { o.recv, o.recvP = b, unsafe.Pointer(b) }

// setType sets o's data type to T's.
func setType[T any](o *operation) error {
	dt, err := dataType[T]()
	if err != nil {
		return prefixed(o.name, err)
	}
	o.dt = dt
	return nil
}

// setRed sets o's reduction.
func setRed(o *operation, op Op) error {
	r, err := op.raw()
	if err != nil {
		return prefixed(o.name, err)
	}
	o.red = r
	return nil
}

// setRank sets o's root or peer (what names it in errors), a rank of c.
func setRank(o *operation, c *Comm, r int, what string) error {
	if n := c.Size(); r < 0 || (n > 0 && r >= n) || r > math.MaxInt32 {
		return invalid("%s: %s %d is not a rank of the communicator (%d ranks)", o.name, what, r, n)
	}
	o.peer = int32(r)
	return nil
}

// needBoth refuses a nil send or recv buffer.
func needBoth[T any](name string, send, recv *driver.Buffer[T]) error {
	switch {
	case send == nil:
		return invalid("%s: nil send buffer", name)
	case recv == nil:
		return invalid("%s: nil recv buffer", name)
	}
	return nil
}

// prefixed puts the operation's name before an argument error.
func prefixed(name string, err error) error {
	if ae, ok := err.(*argError); ok {
		return &argError{msg: name + ": " + ae.msg}
	}
	return err
}
