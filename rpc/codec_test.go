package rpc

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// prewrites is a CheckAndMutateRows request shaped as a transaction's
// prewrites of n rows: each row's predicate (another lock, a newer write
// record, a fence) and its lock and data.
func prewrites(n int) *rpcpb.CheckAndMutateRowsRequest {
	req := &rpcpb.CheckAndMutateRowsRequest{}
	for i := range n {
		pred := storage.Filter{
			{Family: "lock", Qualifier: "balance"},
			{Family: "write", Qualifier: "balance", Time: storage.From(1 << 40)},
			{Family: "fence", AllQualifiers: true, Time: storage.From(1 << 40)},
		}
		muts := []storage.Mutation{
			storage.SetCell("lock", "balance", 1<<40, make([]byte, 80)),
			storage.SetCell("data", "balance", 1<<40, []byte(fmt.Sprintf("value %d", i))),
		}
		req.Checks = append(req.Checks, &rpcpb.RowCheck{Row: fmt.Appendf(nil, "bench/audit/%016x/%03d", i*7919, i),
			Predicate: FilterToPB(pred), IfFalse: MutationsToPB(muts)})
	}
	return req
}

// TestCodecRoundTrip: messages below the pooling threshold, of a frame,
// and of many frames (the received bytes in pieces, as gRPC hands them
// over) come back equal; the bytes are gRPC's proto codec's; what is not
// a proto message is an error.
func TestCodecRoundTrip(t *testing.T) {
	grpcCodec := encoding.GetCodecV2("proto")
	for _, n := range []int{0, 1, 20, 200, 3000} {
		req := prewrites(n)
		data, err := Codec.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := grpcCodec.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if string(data.Materialize()) != string(theirs.Materialize()) {
			t.Fatalf("%d rows: the bytes differ from gRPC's codec's", n)
		}
		theirs.Free()
		// Split as a transport's frames would be.
		whole := data.Materialize()
		data.Free()
		var pieces mem.BufferSlice
		for len(whole) > 0 {
			k := min(len(whole), 16<<10)
			pieces = append(pieces, mem.SliceBuffer(whole[:k]))
			whole = whole[k:]
		}
		var got rpcpb.CheckAndMutateRowsRequest
		if err := Codec.Unmarshal(pieces, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, req) {
			t.Fatalf("%d rows: the message came back changed", n)
		}
	}
	if _, err := Codec.Marshal("not a message"); err == nil {
		t.Error("Marshal of a string: no error")
	}
	var s string
	if err := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{1})}, &s); err == nil {
		t.Error("Unmarshal into a string: no error")
	}
}

// BenchmarkCodecPrewrites: a 200-row prewrite request marshalled and
// unmarshalled from a transport's 16 KiB frames, by gRPC's proto codec
// and by Codec, alternating call by call; it reports each one's time
// (ns/call-grpc, ns/call-pool) and pool/grpc, their ratio.
func BenchmarkCodecPrewrites(b *testing.B) {
	req := prewrites(200)
	codecs := []encoding.CodecV2{encoding.GetCodecV2("proto"), Codec}
	var spent [2]time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % 2
		start := time.Now()
		data, err := codecs[k].Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		var frames mem.BufferSlice
		for _, buf := range data {
			for rest := buf.ReadOnlyData(); len(rest) > 0; {
				n := min(len(rest), 16<<10)
				frames = append(frames, mem.Copy(rest[:n], mem.DefaultBufferPool()))
				rest = rest[n:]
			}
		}
		data.Free()
		var got rpcpb.CheckAndMutateRowsRequest
		if err := codecs[k].Unmarshal(frames, &got); err != nil {
			b.Fatal(err)
		}
		frames.Free()
		spent[k] += time.Since(start)
	}
	per := func(k int) float64 { return float64(spent[k]) / float64((b.N+1-k)/2) }
	b.ReportMetric(per(0), "ns/call-grpc")
	b.ReportMetric(per(1), "ns/call-pool")
	b.ReportMetric(per(1)/per(0), "pool/grpc")
}
