export { RunwayFault, StoreUnavailable, isFault } from "./errors.js";
export { systemClock, type Clock } from "./clock.js";
export { createLogger, type Logger } from "./log.js";
export { jsonBytes } from "./json-size.js";
export { type ConnectionConfig } from "./nats/connection.js";
export { publish, readLast, isRemoval, isRemovalOperation, incrementCounter, incrementCounterOnce, payloadLimit } from "./nats/jetstream.js";
export { CMD_STREAM, partitionBucket, partitionStream, kvSubject, streamConfigs, ensureBucket, ensureFlags } from "./topology.js";
export { partitionOf } from "./partitions/hash.js";
export { PartitionLog } from "./store/partition-log.js";
export { readJournal, readJournalTail, type JournalEntry } from "./store/journal.js";
export { defineActor, ID_PATTERN, type ActorAddress, type ActorDefinition, type Effect } from "./actor/define.js";
export { ActorHost, type HostDecorators } from "./actor/host.js";
export { listDeadLetters } from "./actor/dead-letters.js";
export { eventId, parseEventId } from "./actor/live-events.js";
export { decodeActor, migratedSnapshot, readActor, type RecordFormat } from "./actor/read.js";
export { type ActorTypes, type MigrationStep } from "./actor/define.js";
export {
  answerOf,
  type LocalReceiver,
  type LocalReceivers,
  type AnswerTo,
  type Asked,
  type CommandOf,
  type Dispatched,
  type WithValue,
} from "./actor/protocol.js";
export { eventBody } from "./actor/outbox.js";
export { MailboxClient } from "./actor/mailbox.js";
export { actorRecordCodec, type ActorRecord } from "./actor/wire.js";
export { startNode, DEFAULT_LEASE_TTL_MS, type NodeConfig, type RunwayNode } from "./node.js";
export { StepPool, type StepResult, type TaskRef } from "./pool/index.js";
export { MicroService, SERVICE_ERROR_HEADER, SERVICE_ERROR_CODE_HEADER, type MicroRequest } from "./micro/index.js";
export { rawRequest } from "./nats/requests.js";
export { sentHeaders } from "./nats/headers.js";
export { eventLoopSpin, SPIN_OFF, type SpinPolicy } from "./event-loop-spin.js";
export type { Stage } from "./lifecycle.js";
export { WatchedBucket } from "./store/watched-bucket.js";
