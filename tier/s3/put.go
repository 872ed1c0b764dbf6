package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strata-log/strata/tier/objstore"
)

// abortTimeout bounds AbortMultipartUpload after a failure, which runs even
// when the caller's context has ended.
const abortTimeout = 30 * time.Second

// Put implements objstore.ObjectStore: one PutObject below
// MultipartThreshold, a parallel multipart upload at or above it.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: negative size %d", objstore.ErrShortBody, size)
	}
	if size >= s.cfg.MultipartThreshold {
		return s.putMultipart(ctx, key, body, size)
	}
	payload, err := seekableBody(body, size)
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(s.fullKey(key)),
		Body:          payload,
		ContentLength: aws.Int64(size),
	}
	s.applySSE(&in.ServerSideEncryption, &in.SSEKMSKeyId)
	_, err = s.client.PutObject(ctx, in)
	return classify("put", key, err)
}

// seekableBody returns exactly size bytes of body as an io.ReadSeeker, which
// the SDK needs to sign the payload: a section of an io.ReaderAt, or the
// body read into memory (bodies below the multipart threshold only).
func seekableBody(body io.Reader, size int64) (io.ReadSeeker, error) {
	if ra, ok := body.(io.ReaderAt); ok {
		if err := checkReaderAtSize(ra, size); err != nil {
			return nil, err
		}
		return io.NewSectionReader(ra, 0, size), nil
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, fmt.Errorf("%w: %v", objstore.ErrShortBody, err)
	}
	var extra [1]byte
	if n, _ := body.Read(extra[:]); n > 0 {
		return nil, fmt.Errorf("%w: body longer than %d bytes", objstore.ErrShortBody, size)
	}
	return bytes.NewReader(buf), nil
}

// checkReaderAtSize fails unless ra holds exactly size bytes, when ra can tell.
func checkReaderAtSize(ra io.ReaderAt, size int64) error {
	sized, ok := ra.(interface{ Size() int64 })
	if ok && sized.Size() != size {
		return fmt.Errorf("%w: body has %d bytes, want %d", objstore.ErrShortBody, sized.Size(), size)
	}
	return nil
}

func (s *Store) applySSE(sse *types.ServerSideEncryption, kmsKey **string) {
	if s.cfg.SSE == "" {
		return
	}
	*sse = types.ServerSideEncryption(s.cfg.SSE)
	if s.cfg.SSE == "aws:kms" && s.cfg.SSEKMSKeyID != "" {
		*kmsKey = aws.String(s.cfg.SSEKMSKeyID)
	}
}

// partSize is the configured part size, grown to stay within 10,000 parts.
func (s *Store) partSize(size int64) int64 {
	part := s.cfg.PartSize
	if need := (size + maxParts - 1) / maxParts; need > part {
		part = need
	}
	return part
}

// putMultipart uploads body in parts, Concurrency at a time, and completes
// the upload only when every part succeeded; otherwise it aborts it, so a
// failed Put leaves no object and (barring a crash) no parts.
func (s *Store) putMultipart(ctx context.Context, key string, body io.Reader, size int64) error {
	in := &s3.CreateMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))}
	s.applySSE(&in.ServerSideEncryption, &in.SSEKMSKeyId)
	created, err := s.client.CreateMultipartUpload(ctx, in)
	if err != nil {
		return classify("create multipart", key, err)
	}
	s.stats.uploads.Add(1)
	upload := &multipartUpload{store: s, key: key, id: aws.ToString(created.UploadId)}
	parts, err := upload.uploadParts(ctx, body, size, s.partSize(size))
	if err == nil {
		err = upload.complete(ctx, parts)
	}
	if err != nil {
		upload.abort()
		return err
	}
	return nil
}

type multipartUpload struct {
	store *Store
	key   string
	id    string
}

// partJob is one part to upload; data is nil when read from an io.ReaderAt.
type partJob struct {
	number int32
	reader io.ReadSeeker
	size   int64
}

// uploadParts feeds parts to Concurrency workers and collects their ETags.
// Bodies that are io.ReaderAt are read in place; others are read part by
// part into buffers (at most Concurrency+1 buffers live at once).
func (u *multipartUpload) uploadParts(ctx context.Context, body io.Reader, size, partSize int64) ([]types.CompletedPart, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan partJob)
	var (
		mu       sync.Mutex
		parts    []types.CompletedPart // guarded by mu
		firstErr error                 // guarded by mu
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel(err)
	}
	for range u.store.cfg.Concurrency {
		wg.Go(func() {
			for job := range jobs {
				part, err := u.uploadPart(ctx, job)
				if err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				parts = append(parts, part)
				mu.Unlock()
			}
		})
	}
	if err := feedParts(ctx, jobs, body, size, partSize); err != nil {
		fail(err)
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(parts, func(i, j int) bool { return *parts[i].PartNumber < *parts[j].PartNumber })
	return parts, nil
}

// feedParts cuts body into parts and sends them until done or ctx ends.
func feedParts(ctx context.Context, jobs chan<- partJob, body io.Reader, size, partSize int64) error {
	ra, inPlace := body.(io.ReaderAt)
	if inPlace {
		if err := checkReaderAtSize(ra, size); err != nil {
			return err
		}
	}
	var number int32
	for offset := int64(0); offset < size; offset += partSize {
		number++
		n := min(partSize, size-offset)
		job := partJob{number: number, size: n}
		if inPlace {
			job.reader = io.NewSectionReader(ra, offset, n)
		} else {
			buf := make([]byte, n)
			if _, err := io.ReadFull(body, buf); err != nil {
				return fmt.Errorf("%w: reading part %d: %v", objstore.ErrShortBody, number, err)
			}
			job.reader = bytes.NewReader(buf)
		}
		select {
		case jobs <- job:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if !inPlace {
		var extra [1]byte
		if n, _ := body.Read(extra[:]); n > 0 {
			return fmt.Errorf("%w: body longer than %d bytes", objstore.ErrShortBody, size)
		}
	}
	return nil
}

// uploadPart uploads one part, retrying transient errors with PartRetry.
func (u *multipartUpload) uploadPart(ctx context.Context, job partJob) (types.CompletedPart, error) {
	var etag *string
	attempts := 0
	err := u.store.cfg.PartRetry.Do(ctx, "upload part", func(ctx context.Context) error {
		if attempts++; attempts > 1 {
			u.store.stats.partRetries.Add(1)
		}
		u.store.stats.parts.Add(1)
		if _, err := job.reader.Seek(0, io.SeekStart); err != nil {
			return err
		}
		out, err := u.store.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        aws.String(u.store.cfg.Bucket),
			Key:           aws.String(u.store.fullKey(u.key)),
			UploadId:      aws.String(u.id),
			PartNumber:    aws.Int32(job.number),
			Body:          job.reader,
			ContentLength: aws.Int64(job.size),
		})
		if err != nil {
			return classify(fmt.Sprintf("upload part %d", job.number), u.key, err)
		}
		etag = out.ETag
		return nil
	})
	return types.CompletedPart{ETag: etag, PartNumber: aws.Int32(job.number)}, err
}

func (u *multipartUpload) complete(ctx context.Context, parts []types.CompletedPart) error {
	_, err := u.store.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(u.store.cfg.Bucket),
		Key:             aws.String(u.store.fullKey(u.key)),
		UploadId:        aws.String(u.id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err == nil {
		u.store.stats.completed.Add(1)
	}
	return classify("complete multipart", u.key, err)
}

// abort releases the parts of a failed upload, best effort.
func (u *multipartUpload) abort() {
	u.store.stats.aborted.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	_, err := u.store.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(u.store.cfg.Bucket),
		Key:      aws.String(u.store.fullKey(u.key)),
		UploadId: aws.String(u.id),
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		u.store.cfg.Logger.Warn("s3: abort multipart upload failed; parts remain until a lifecycle rule removes them",
			"key", u.key, "upload", u.id, "err", err)
	}
}
