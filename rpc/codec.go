package rpc

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Codec is gRPC's proto codec with a buffer pool of finer sizes: what
// Dial's connections and the server marshal and unmarshal with
// (CodecCallOption, CodecServerOption). The wire format is gRPC's own
// ("proto"); only where the buffers come from differs.
//
// gRPC's default pool has buffers of 256 B, 4, 16 and 32 KiB and 1 MiB,
// and zeroes a buffer's whole capacity each time it hands it out. A
// message of 32 KiB to 1 MiB (a transaction's prewrites of a few hundred
// rows, their commit records) is marshalled into a 1 MiB buffer, and a
// received one longer than a frame gathered into one: a megabyte cleared
// for each such call, on both sides. This pool has a size at every power
// of two from 256 B to 1 MiB, so a buffer is at most twice the message.
var Codec codec

type codec struct{}

// codecPool is Codec's pool; buffers are zeroed as gRPC's are.
var codecPool = func() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	if err != nil {
		panic(fmt.Sprintf("rpc: buffer pool: %v", err))
	}
	return p
}()

// Marshal implements encoding.CodecV2.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc: cannot marshal %T, not a proto.Message", v)
	}
	// UseCachedSize is safe right after Size, on a message no one else
	// changes meanwhile (gRPC's codec does the same).
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := codecPool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		codecPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, codecPool)}, nil
}

// Unmarshal implements encoding.CodecV2.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc: cannot unmarshal into %T, not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(codecPool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// Name implements encoding.CodecV2: the content subtype gRPC's proto
// codec has, since the bytes are the same.
func (codec) Name() string { return "proto" }

// CodecServerOption makes a gRPC server use Codec.
func CodecServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(Codec) }

// CodecCallOption makes a client's calls use Codec.
func CodecCallOption() grpc.CallOption { return grpc.ForceCodecV2(Codec) }
