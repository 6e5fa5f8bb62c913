package main

import (
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/adapters/minio"
)

// s3SettingKeys names, in the relay's configuration keys (the
// [[databases.upstreams]] table of a bucket upstream), where the setting a
// bucket error blames comes from; "" if the error blames none or one the
// configuration does not set. The adapter's messages describe the problem
// without naming its Go fields; this says what to change.
func s3SettingKeys(err error) string {
	var se *minio.SettingError
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Setting {
	case minio.SettingAccessKey:
		return "check access_key"
	case minio.SettingSecretKey:
		return "check the secret key (secret_key_file or secret_key_env)"
	case minio.SettingRegion:
		if se.Want != "" {
			return fmt.Sprintf("set region = %q (or leave region out to ask the server)", se.Want)
		}
		return "check region and the credentials"
	case minio.SettingCACert:
		return "trust the server's certificate authority with ca_file (a PEM file)"
	case minio.SettingSecure, minio.SettingEndpoint:
		return "check endpoint (host:port, or http:// or https:// to choose the scheme)"
	case minio.SettingBucket:
		return "check bucket"
	case minio.SettingPathStyle, minio.SettingVirtualHost:
		return "check path_style"
	}
	return ""
}

// withS3SettingKeys appends s3SettingKeys to an error's message.
func withS3SettingKeys(err error) error {
	if keys := s3SettingKeys(err); keys != "" {
		return fmt.Errorf("%w; %s", err, keys)
	}
	return err
}
