export { RunwayFault, StoreUnavailable, UnsupportedServer, isFault, faultFrom, type FaultKind, type SerializedFault } from "./errors.js";
export { systemClock, type Clock } from "./clock.js";
export { createLogger, silentLogger, type Logger, type LogLevel } from "./log.js";
export { versionedCodec, packMsgpack, unpackMsgpack, MAX_ENCODED_DEPTH, type Codec, type CodecSpec, type DecodeResult } from "./codec.js";
export { jsonBytes } from "./json-size.js";
export { connectNats, compareVersions, MIN_SERVER_VERSION, type ConnectionConfig } from "./nats/connection.js";
export {
  publish,
  readFirst,
  readLast,
  publishChain,
  type ChainOutcome,
  isRemoval,
  isRemovalOperation,
  incrementCounter,
  streamLastSequence,
  payloadLimit,
  DEFAULT_MAX_PAYLOAD,
  type PublishOutcome,
  type ReadOutcome,
  type StoredMessage,
} from "./nats/jetstream.js";
export {
  ensureTopology,
  DEFAULT_TOPOLOGY,
  CMD_STREAM,
  DLQ_STREAM,
  deadLetterSubject,
  NODES_BUCKET,
  META_BUCKET,
  partitionBucket,
  partitionStream,
  partitionConsumer,
  mailboxSubject,
  askSubject,
  askFilter,
  timerSubject,
  kvSubject,
  streamConfigs,
  JOURNAL_LIMIT,
  ensureBucket,
  ensureFlags,
  type TopologyConfig,
} from "./topology.js";
export { fnv1a32, partitionOf } from "./partitions/hash.js";
export { preferredOwner, placementFor, PLACEMENT_VERSION, type PlacementVersion } from "./partitions/placement.js";
export { Membership, type NodeRecord } from "./partitions/membership.js";
export { PartitionOwnership } from "./partitions/ownership.js";
export {
  PartitionLog,
  readFence,
  FENCE_KEY,
  type ActorLog,
  type LogBatchOutcome,
  type LogEntry,
  type Authority,
  type FenceRecord,
  type LogWriteOutcome,
  type ClaimOutcome,
} from "./store/partition-log.js";
export { readJournal, type JournalEntry, type JournalRead } from "./store/journal.js";
export { currentSnapshot, snapshotVersion } from "./actor/migrate.js";
export { decodeActor, migratedSnapshot, readActor, type ActorRead, type RecordFormat, type StoredSnapshot } from "./actor/read.js";
export {
  defineActor,
  EffectSchema,
  AddressSchema,
  ID_PATTERN,
  KIND_PATTERN,
  type ActorDefinition,
  type ActorAddress,
  type Effect,
  type ActorTypes,
  type MigrationStep,
} from "./actor/define.js";
export {
  answerOf,
  type LocalReceiver,
  type LocalReceivers,
  type AnswerTo,
  type Answered,
  type Asked,
  type CommandOf,
  type Dispatched,
  type WithValue,
} from "./actor/protocol.js";
export { ActorHost, DEFAULT_MAX_DELIVERIES, type ActorHostConfig, type HostDecorators } from "./actor/host.js";
export { DeadLetterBox, DeadLetterReason, listDeadLetters, type DeadLetter, type DeadLetterView } from "./actor/dead-letters.js";
export { LiveEvents, eventId, parseEventId, type LiveEventStats } from "./actor/live-events.js";
export { eventBody } from "./actor/outbox.js";
export type { HostStats } from "./actor/delivery.js";
export { MailboxClient } from "./actor/mailbox.js";
export { ASK_MAILBOX, HEADER_ASK } from "./actor/asks.js";
export { actorRecordCodec, commandCodec, answerCodec, HEADER_ID, HEADER_REPLY, type ActorRecord, type CommandAnswer } from "./actor/wire.js";
export { Lifecycle, type Stage } from "./lifecycle.js";
export { startNode, type NodeConfig, type RunwayNode } from "./node.js";
export {
  StepPool,
  TerminalError,
  RetryableError,
  ToolError,
  type StepPoolOptions,
  type StepTask,
  type StepResult,
  type TaskRef,
  type ToolCallAnswer,
  type Handler,
  type HandlerModule,
  type StepContext,
} from "./pool/index.js";
export { MicroService, SERVICE_ERROR_HEADER, SERVICE_ERROR_CODE_HEADER, type ServiceInfo, type EndpointSpec, type MicroRequest } from "./micro/index.js";
export { rawRequest, expectReply, type RawReply } from "./nats/requests.js";
export { sentHeaders } from "./nats/headers.js";
export { eventLoopSpin, EventLoopSpin, SPIN_OFF, type SpinPolicy, type SpinScheduler } from "./event-loop-spin.js";
