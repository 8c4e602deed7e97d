/**
 * Test support: a protobufjs Root from proto source text, loaded the way the gateway loads the
 * real protos (keepCase, options parsed, google/api and workauto/api imports resolved), so unit
 * tests can cover field kinds the real protos do not use yet (int64, double, oneof, maps, wrappers).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_ROOT } from './index.js';

const PROTOBUFJS = dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'));

export function rootFromSource(source: string): protobuf.Root {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-proto-'));
  writeFileSync(join(dir, 'fixture.proto'), source);
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    if (target === 'fixture.proto') return join(dir, target);
    if (target.startsWith('google/protobuf/'))
      return target === 'google/protobuf/descriptor.proto' ? join(PROTOBUFJS, target) : target;
    return join(PROTO_ROOT, target);
  };
  try {
    root.loadSync('fixture.proto', { keepCase: true });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  root.resolveAll();
  return root;
}

/** A service using every field kind the JSON mapping supports. */
export const FIXTURE_PROTO = `
syntax = "proto3";
package workauto.fixture.v1;
import "google/api/annotations.proto";
import "google/api/field_behavior.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "workauto/api/v1/http.proto";
import "workauto/api/v1/policy.proto";

service FixtureService {
  // Makes a thing.
  rpc CreateThing(CreateThingRequest) returns (Thing) {
    option (google.api.http) = {post: "/api/v1/things" body: "*"};
    option (workauto.api.v1.policy) = {domain: "crm" level: ACCESS_LEVEL_WRITE};
  }
  rpc ListThings(ListThingsRequest) returns (ListThingsResponse) {
    option (google.api.http) = {get: "/api/v1/things" response_body: "data"};
    option (workauto.api.v1.policy) = {domain: "crm" level: ACCESS_LEVEL_READ};
  }
  rpc GetThing(GetThingRequest) returns (Thing) {
    option (google.api.http) = {get: "/api/v1/things/{id}"};
  }
  rpc SetLabel(SetLabelRequest) returns (Thing) {
    option (google.api.http) = {put: "/api/v1/things/{thing_id}/labels/{key}" body: "label"};
  }
  rpc MarkThing(GetThingRequest) returns (Thing) {
    option (google.api.http) = {post: "/api/v1/things/{id}/mark"};
  }
  rpc DeleteThing(GetThingRequest) returns (google.protobuf.Empty) {
    option (google.api.http) = {delete: "/api/v1/things/{id}"};
    option (workauto.api.v1.policy) = {auth: AUTH_PLATFORM_ADMIN};
  }
  rpc PublicThing(GetThingRequest) returns (Thing) {
    option (google.api.http) = {get: "/api/v1/public/things/{id}"};
    option (workauto.api.v1.policy) = {auth: AUTH_NONE};
  }
  rpc FinishLogin(FinishLoginRequest) returns (workauto.api.v1.Redirect) {
    option (google.api.http) = {get: "/api/v1/login/{provider}/callback"};
    option (workauto.api.v1.policy) = {auth: AUTH_NONE};
  }
  rpc Internal(GetThingRequest) returns (Thing);
}

enum ThingKind {
  THING_KIND_UNSPECIFIED = 0;
  THING_KIND_BIG_BOX = 1;
  THING_KIND_SMALL = 2;
}

message Stage {
  string name = 1 [(google.api.field_behavior) = REQUIRED];
  optional double confidence = 2;
  int32 display_order = 3;
}

message Label {
  string text = 1;
  string color = 2;
}

message Thing {
  string id = 1;
  int64 amount = 2;
  double ratio = 3;
  bool flag = 4;
  ThingKind kind = 5;
  repeated Stage stages = 6;
  map<string, int32> counts = 7;
  map<int32, string> by_number = 8;
  google.protobuf.Struct metadata = 9;
  google.protobuf.Value anything = 10;
  google.protobuf.ListValue list = 11;
  google.protobuf.Timestamp at = 12;
  optional string note = 13;
  google.protobuf.StringValue alias = 14;
  oneof target {
    string url = 15;
    int32 port = 16;
  }
  repeated string tags = 17;
  uint32 small = 18;
  Label label = 19;
  bytes blob = 20;
}

message CreateThingRequest {
  string name = 1 [(google.api.field_behavior) = REQUIRED];
  ThingKind kind = 2;
  int64 amount = 3;
  repeated Stage stages = 4;
  google.protobuf.Struct metadata = 5;
  google.protobuf.Timestamp at = 6;
  oneof target {
    string url = 7;
    int32 port = 8;
  }
  optional string note = 9;
  map<int32, string> by_number = 10;
  uint32 small = 11;
  google.protobuf.Int64Value big = 12;
}

message ListThingsRequest {
  optional int32 limit = 1;
  optional string cursor = 2;
  repeated ThingKind kinds = 3;
  optional bool archived = 4;
  google.protobuf.Timestamp since = 5;
  int64 min_amount = 6;
  double min_ratio = 7;
  Stage stage = 8;
  google.protobuf.StringValue alias = 9;
}

message ListThingsResponse {
  repeated Thing data = 1;
  bool has_more = 2;
  optional string next_cursor = 3;
}

message GetThingRequest {
  string id = 1;
}

message FinishLoginRequest {
  string provider = 1;
  optional string code = 2;
  optional string state = 3;
}

message SetLabelRequest {
  string thing_id = 1;
  string key = 2;
  Label label = 3;
}
`;
