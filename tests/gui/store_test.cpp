// ConversationStore: schema and migrations, transactions, search, export, and crash safety (a
// writer killed with SIGKILL loses at most the message it was generating).
#include <gtest/gtest.h>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>

#include "conversation/conversationstore.h"

namespace neural::gui {
namespace {

// Runs SQL statements on `path` through a connection of its own (to build old / odd files).
void rawSql(const QString& path, const QStringList& statements) {
    {
        QSqlDatabase db =
            QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        ASSERT_TRUE(db.open());
        QSqlQuery q(db);
        for (const QString& s : statements) ASSERT_TRUE(q.exec(s)) << s.toStdString();
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
}

int rawInt(const QString& path, const QString& sql) {
    int v = -1;
    {
        QSqlDatabase db =
            QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        if (db.open()) {
            QSqlQuery q(db);
            if (q.exec(sql) && q.next()) v = q.value(0).toInt();
            db.close();
        }
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
    return v;
}

TEST(ConversationStore, CreatesTheSchemaAndRoundTripsMessages) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    {
        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        EXPECT_EQ(s.schemaVersion(), ConversationStore::kSchemaVersion);
        const qint64 a = s.createConversation(QStringLiteral("Alpha"));
        const qint64 b = s.createConversation(QStringLiteral("Beta"));
        ASSERT_GT(a, 0);
        ASSERT_GT(b, a);
        EXPECT_GT(s.appendMessage(a, QStringLiteral("user"), QStringLiteral("hi there")).id, 0)
            << s.lastError().toStdString();
        const QJsonObject stats{{QStringLiteral("tokens"), 7}};
        const auto reply =
            s.appendMessage(a, QStringLiteral("assistant"), QStringLiteral("**hello**"),
                            QStringLiteral("thinking"), stats);
        EXPECT_EQ(reply.position, 1);
        EXPECT_GT(s.appendMessage(b, QStringLiteral("user"), QStringLiteral("zebra facts")).id, 0);
        ASSERT_TRUE(
            s.setConversationSettings(a, QStringLiteral("Be brief."), QStringLiteral("high")));
    }
    ConversationStore s;  // reopened: everything was committed
    ASSERT_TRUE(s.open(path));
    const auto list = s.conversations();
    ASSERT_EQ(list.size(), 2);
    EXPECT_EQ(list[0].title, QStringLiteral("Beta"));  // most recently updated first
    const auto alpha = s.conversation(list[1].id);
    ASSERT_TRUE(alpha);
    EXPECT_EQ(alpha->systemPrompt, QStringLiteral("Be brief."));
    EXPECT_EQ(alpha->reasoningEffort, QStringLiteral("high"));
    const auto msgs = s.messages(alpha->id);
    ASSERT_EQ(msgs.size(), 2);
    EXPECT_EQ(msgs[1].role, QStringLiteral("assistant"));
    EXPECT_EQ(msgs[1].content, QStringLiteral("**hello**"));
    EXPECT_EQ(msgs[1].reasoning, QStringLiteral("thinking"));
    EXPECT_EQ(msgs[1].stats.value(QStringLiteral("tokens")).toInt(), 7);

    // Search: by title and by message text, case-insensitive.
    ASSERT_EQ(s.conversations(QStringLiteral("ZEBRA")).size(), 1);
    EXPECT_EQ(s.conversations(QStringLiteral("ZEBRA"))[0].title, QStringLiteral("Beta"));
    EXPECT_EQ(s.conversations(QStringLiteral("alp")).size(), 1);
    EXPECT_TRUE(s.conversations(QStringLiteral("nothing like this")).isEmpty());

    ASSERT_TRUE(s.renameConversation(alpha->id, QStringLiteral("Renamed")));
    EXPECT_EQ(s.conversation(alpha->id)->title, QStringLiteral("Renamed"));
    EXPECT_FALSE(s.renameConversation(9999, QStringLiteral("x")));
    ASSERT_TRUE(s.truncate(alpha->id, 1));
    EXPECT_EQ(s.messages(alpha->id).size(), 1);
    ASSERT_TRUE(s.deleteConversation(alpha->id));
    EXPECT_FALSE(s.conversation(alpha->id));
    EXPECT_TRUE(s.messages(alpha->id).isEmpty());
    EXPECT_TRUE(s.integrityOk());
}

TEST(ConversationStore, MigratesAVersion1FileKeepingItsMessages) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("v1.sqlite"));
    // The version-1 schema exactly as the first release wrote it.
    rawSql(path,
           {QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)"),
            QStringLiteral("INSERT INTO schema_version VALUES (1)"),
            QStringLiteral(
                "CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                " title TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL)"),
            QStringLiteral(
                "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                " conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
                " position INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,"
                " reasoning TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL,"
                " UNIQUE (conversation_id, position))"),
            QStringLiteral("INSERT INTO conversations VALUES (1, 'old chat', 1, 2)"),
            QStringLiteral(
                "INSERT INTO messages (conversation_id, position, role, content, created_ms)"
                " VALUES (1, 0, 'user', 'from v1', 1)")});
    ConversationStore s;
    ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
    EXPECT_EQ(s.schemaVersion(), ConversationStore::kSchemaVersion);
    const auto c = s.conversation(1);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->title, QStringLiteral("old chat"));
    EXPECT_EQ(c->reasoningEffort, QStringLiteral("medium"));  // the v2 column's default
    EXPECT_EQ(c->sampling, SamplingSettings{});               // the v4 column's default
    const auto msgs = s.messages(1);
    ASSERT_EQ(msgs.size(), 1);
    EXPECT_EQ(msgs[0].content, QStringLiteral("from v1"));
    EXPECT_TRUE(msgs[0].stats.isEmpty());
    // New rows use the new columns.
    EXPECT_GT(s.appendMessage(1, QStringLiteral("assistant"), QStringLiteral("ok"), {},
                              {{QStringLiteral("tokens"), 3}})
                  .id,
              0);
    EXPECT_EQ(s.messages(1)[1].stats.value(QStringLiteral("tokens")).toInt(), 3);
}

// The settings panel's values live with the conversation; a damaged or hand-edited value reads
// as the defaults (not JSON) or is clamped into the API's limits (numbers out of range).
TEST(ConversationStore, KeepsEachConversationsSamplingSettings) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("sampling.sqlite"));
    SamplingSettings custom;
    custom.temperature = 0.25;
    custom.topP = 0.8;
    custom.topK = 40;
    custom.minP = 0.1;
    custom.fixedSeed = true;
    custom.seed = 1234;
    custom.maxTokens = 333;
    qint64 a = 0, b = 0;
    {
        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        a = s.createConversation(QStringLiteral("a"));
        b = s.createConversation(QStringLiteral("b"));
        ASSERT_TRUE(s.setConversationSampling(a, custom));
        EXPECT_NE(QString::fromUtf8(s.exportJson(a)).indexOf(QStringLiteral("\"top_k\": 40")), -1);
    }
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    EXPECT_EQ(s.conversation(a)->sampling, custom);
    EXPECT_EQ(s.conversation(a)->sampling.seed, 1234);
    EXPECT_EQ(s.conversation(b)->sampling, SamplingSettings{});
    s.close();

    rawSql(path,
           {QStringLiteral("UPDATE conversations SET sampling = 'not json' WHERE id = %1").arg(a),
            QStringLiteral("UPDATE conversations SET sampling = '{\"temperature\": 9, "
                           "\"top_p\": 0, \"top_k\": -3, \"min_p\": \"x\", "
                           "\"seed\": 0}' WHERE id = %1")
                .arg(b)});
    ASSERT_TRUE(s.open(path));
    EXPECT_EQ(s.conversation(a)->sampling, SamplingSettings{});
    const SamplingSettings clamped = s.conversation(b)->sampling;
    EXPECT_EQ(clamped.temperature, SamplingSettings::kMaxTemperature);
    EXPECT_GT(clamped.topP, 0.0);
    EXPECT_EQ(clamped.topK, 0);
    EXPECT_EQ(clamped.minP, 0.0);
    EXPECT_TRUE(clamped.fixedSeed);
    EXPECT_EQ(clamped.seed, 1);
}

// Every field of two stored messages, versions (and what followed each) included.
void expectSameMessage(const StoredMessage& a, const StoredMessage& b, int i) {
    EXPECT_EQ(a.id, b.id) << i;
    EXPECT_EQ(a.position, b.position) << i;
    EXPECT_EQ(a.role, b.role) << i;
    EXPECT_EQ(a.content, b.content) << i;
    EXPECT_EQ(a.reasoning, b.reasoning) << i;
    EXPECT_EQ(a.createdMs, b.createdMs) << i;
    EXPECT_EQ(a.stats, b.stats) << i;
    EXPECT_EQ(a.version, b.version) << i;
    ASSERT_EQ(a.versions.size(), b.versions.size()) << i;
    for (int v = 0; v < a.versions.size(); ++v) {
        EXPECT_EQ(a.versions[v].content, b.versions[v].content) << i << "/" << v;
        EXPECT_EQ(a.versions[v].stats, b.versions[v].stats) << i << "/" << v;
        EXPECT_EQ(a.versions[v].following, b.versions[v].following) << i << "/" << v;
    }
}

void expectSameMessages(const QList<StoredMessage>& a, const QList<StoredMessage>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (int i = 0; i < a.size(); ++i) expectSameMessage(a[i], b[i], i);
}

// A conversation of four messages whose last reply was regenerated once.
qint64 fourMessages(ConversationStore& s) {
    const qint64 c = s.createConversation(QStringLiteral("t"));
    s.appendMessage(c, QStringLiteral("user"), QStringLiteral("first"));
    s.appendMessage(c, QStringLiteral("assistant"), QStringLiteral("reply one"),
                    QStringLiteral("thinking"), QJsonObject{{QStringLiteral("tokens"), 3}});
    s.appendMessage(c, QStringLiteral("user"), QStringLiteral("second"), {},
                    QJsonObject{{QStringLiteral("text_length"), 6}});
    const StoredMessage r = s.appendMessage(c, QStringLiteral("assistant"), QStringLiteral("b"));
    s.setMessageVersions(
        r.id,
        {{QStringLiteral("a"), {}, QJsonObject{{QStringLiteral("tokens"), 1}}, {}},
         {QStringLiteral("b"), {}, QJsonObject{{QStringLiteral("tokens"), 2}}, {}}},
        1);
    return c;
}

// Schema 5: a v4 file (the same tables) opens with every message as it was; a step that fails
// leaves the file at its version with all its data (each step is one transaction).
TEST(ConversationStore, MigratesAVersion4FileAndAFailedStepChangesNothing) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    qint64 c = 0;
    QList<StoredMessage> before;
    {
        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        c = fourMessages(s);
        before = s.messages(c);
    }
    // What a v4 app leaves (the step to 5 changes no table), and a trigger that makes the step
    // fail. Written against kSchemaVersion: the edit step stays the last one.
    constexpr int kBefore = ConversationStore::kSchemaVersion - 1;
    rawSql(path, {QStringLiteral("UPDATE schema_version SET version = %1").arg(kBefore),
                  QStringLiteral("CREATE TRIGGER refuse BEFORE UPDATE ON schema_version BEGIN "
                                 "SELECT RAISE(ABORT, 'refused'); END")});
    {
        ConversationStore s;
        EXPECT_FALSE(s.open(path));
        EXPECT_TRUE(s.lastError().contains(
            QStringLiteral("schema version %1").arg(ConversationStore::kSchemaVersion)))
            << s.lastError().toStdString();
    }
    EXPECT_EQ(rawInt(path, QStringLiteral("SELECT version FROM schema_version")), kBefore);
    EXPECT_EQ(rawInt(path, QStringLiteral("SELECT COUNT(*) FROM messages")), 4);
    rawSql(path, {QStringLiteral("DROP TRIGGER refuse")});
    ConversationStore s;
    ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
    EXPECT_EQ(s.schemaVersion(), ConversationStore::kSchemaVersion);
    expectSameMessages(s.messages(c), before);
    EXPECT_TRUE(s.integrityOk());
}

// An edit of an earlier message of yours keeps the old text and what followed it as a version:
// flipping back restores them exactly (ids, times, stats, versions), also after reopening the
// file; branches nest; a branched copy of the conversation can flip too (new ids where taken).
TEST(ConversationStore, AnEditKeepsTheOldBranchAsAVersion) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    const qint64 c = fourMessages(s);
    const QList<StoredMessage> original = s.messages(c);

    const QJsonObject editStats{{QStringLiteral("text_length"), 7}};
    const StoredMessage edited = s.editUserMessage(c, 2, QStringLiteral("second!"), editStats);
    ASSERT_EQ(edited.id, original[2].id) << s.lastError().toStdString();
    EXPECT_EQ(edited.version, 1);
    QList<StoredMessage> now = s.messages(c);
    ASSERT_EQ(now.size(), 3);  // the conversation ends with the edited message
    EXPECT_EQ(now[2].content, QStringLiteral("second!"));
    EXPECT_EQ(now[2].stats, editStats);
    ASSERT_EQ(now[2].versions.size(), 2);
    EXPECT_EQ(now[2].versions[0].content, QStringLiteral("second"));
    EXPECT_EQ(now[2].versions[0].following.size(), 1);
    EXPECT_TRUE(now[2].versions[1].following.isEmpty());
    // The new branch gets its reply.
    const StoredMessage reply =
        s.appendMessage(c, QStringLiteral("assistant"), QStringLiteral("c"));
    const QList<StoredMessage> newBranch = s.messages(c);

    // Back to the first version: exactly the conversation before the edit.
    ASSERT_TRUE(s.showVersion(c, 2, 0)) << s.lastError().toStdString();
    now = s.messages(c);
    ASSERT_EQ(now.size(), 4);
    for (int i : {0, 1, 3}) expectSameMessage(now[i], original[i], i);
    EXPECT_EQ(now[2].content, QStringLiteral("second"));
    EXPECT_EQ(now[2].stats, original[2].stats);
    EXPECT_EQ(now[2].version, 0);
    EXPECT_EQ(now[2].versions[1].following.size(), 1);
    EXPECT_FALSE(s.showVersion(c, 2, 0));  // shown already
    EXPECT_FALSE(s.showVersion(c, 2, 5));
    EXPECT_FALSE(s.showVersion(c, 1, 0));  // a reply with one version
    EXPECT_EQ(s.messages(c).size(), 4);

    // After reopening the file, forward again: the edited branch with its reply.
    s.close();
    ASSERT_TRUE(s.open(path));
    ASSERT_TRUE(s.showVersion(c, 2, 1));
    now = s.messages(c);
    ASSERT_EQ(now.size(), 4);
    EXPECT_EQ(now[2].content, QStringLiteral("second!"));
    EXPECT_EQ(now[3].id, reply.id);
    EXPECT_EQ(now[3].content, QStringLiteral("c"));
    for (int i : {0, 1, 3}) expectSameMessage(now[i], newBranch[i], i);

    // Nested: editing the first message keeps everything after it, branches included.
    const QList<StoredMessage> beforeFirstEdit = s.messages(c);
    ASSERT_NE(s.editUserMessage(c, 0, QStringLiteral("first!"), {}).id, 0);
    EXPECT_EQ(s.messages(c).size(), 1);
    ASSERT_TRUE(s.showVersion(c, 0, 0));
    now = s.messages(c);
    ASSERT_EQ(now.size(), 4);
    for (int i : {1, 2, 3}) expectSameMessage(now[i], beforeFirstEdit[i], i);
    EXPECT_EQ(now[0].content, QStringLiteral("first"));
    EXPECT_EQ(now[0].versions.size(), 2);
    ASSERT_TRUE(s.showVersion(c, 2, 0));
    now = s.messages(c);
    ASSERT_EQ(now.size(), 4);
    for (int i : {1, 3}) expectSameMessage(now[i], original[i], i);

    // A branched copy holds the hidden branch too; where two copies of a message come back,
    // the second gets a new id.
    const qint64 copy = s.branchConversation(c, 2, QStringLiteral("copy"));
    ASSERT_NE(copy, 0);
    ASSERT_TRUE(s.showVersion(copy, 2, 1)) << s.lastError().toStdString();
    const QList<StoredMessage> copied = s.messages(copy);
    ASSERT_EQ(copied.size(), 4);
    EXPECT_EQ(copied[3].content, QStringLiteral("c"));
    EXPECT_EQ(s.messages(c).size(), 4);  // the original is untouched
    ASSERT_TRUE(s.showVersion(c, 2, 1)) << s.lastError().toStdString();
    const QList<StoredMessage> back = s.messages(c);
    ASSERT_EQ(back.size(), 4);
    EXPECT_EQ(back[3].content, QStringLiteral("c"));
    EXPECT_NE(back[3].id, copied[3].id);
    ASSERT_TRUE(s.showVersion(c, 2, 0));
    EXPECT_TRUE(s.integrityOk());

    // Only messages of yours are edited this way.
    EXPECT_EQ(s.editUserMessage(c, 1, QStringLiteral("x"), {}).id, 0);
    EXPECT_EQ(s.editUserMessage(c, 9, QStringLiteral("x"), {}).id, 0);
    EXPECT_EQ(s.messages(c).size(), 4);
}

// Regenerating an earlier reply keeps the old reply and what followed it as a version: the
// new reply ends the conversation, flipping back restores the old branch exactly (also after
// reopening the file), and flipping forward brings the new branch with what was added to it.
TEST(ConversationStore, ARegeneratedEarlierReplyKeepsTheOldBranchAsAVersion) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    const qint64 c = fourMessages(s);
    const QList<StoredMessage> original = s.messages(c);

    const QJsonObject newStats{{QStringLiteral("tokens"), 9}};
    const StoredMessage added =
        s.addReplyVersion(c, 1, {QStringLiteral("reply two"), QStringLiteral("hmm"), newStats, {}});
    ASSERT_EQ(added.id, original[1].id) << s.lastError().toStdString();
    EXPECT_EQ(added.version, 1);
    QList<StoredMessage> now = s.messages(c);
    ASSERT_EQ(now.size(), 2);  // the conversation ends with the new reply
    EXPECT_EQ(now[1].content, QStringLiteral("reply two"));
    EXPECT_EQ(now[1].reasoning, QStringLiteral("hmm"));
    EXPECT_EQ(now[1].stats, newStats);
    ASSERT_EQ(now[1].versions.size(), 2);
    EXPECT_EQ(now[1].versions[0].content, QStringLiteral("reply one"));
    EXPECT_EQ(now[1].versions[0].following.size(), 2);
    EXPECT_TRUE(now[1].versions[1].following.isEmpty());
    const StoredMessage later = s.appendMessage(c, QStringLiteral("user"), QStringLiteral("more"));

    s.close();
    ASSERT_TRUE(s.open(path));
    ASSERT_TRUE(s.showVersion(c, 1, 0)) << s.lastError().toStdString();
    now = s.messages(c);
    ASSERT_EQ(now.size(), 4);
    for (int i : {0, 2, 3}) expectSameMessage(now[i], original[i], i);
    EXPECT_EQ(now[1].content, QStringLiteral("reply one"));
    EXPECT_EQ(now[1].reasoning, QStringLiteral("thinking"));
    EXPECT_EQ(now[1].stats, original[1].stats);
    ASSERT_EQ(now[3].versions.size(), 2);  // the later reply's own versions came back
    ASSERT_TRUE(s.showVersion(c, 1, 1));
    now = s.messages(c);
    ASSERT_EQ(now.size(), 3);
    EXPECT_EQ(now[2].id, later.id);

    // Regenerating again adds a third version; the one shown keeps what follows it.
    ASSERT_NE(s.addReplyVersion(c, 1, {QStringLiteral("reply three"), {}, {}, {}}).id, 0);
    now = s.messages(c);
    ASSERT_EQ(now.size(), 2);
    ASSERT_EQ(now[1].versions.size(), 3);
    EXPECT_EQ(now[1].versions[1].following.size(), 1);
    EXPECT_TRUE(s.integrityOk());

    // Only replies get versions this way.
    EXPECT_EQ(s.addReplyVersion(c, 0, {QStringLiteral("x"), {}, {}, {}}).id, 0);
    EXPECT_EQ(s.addReplyVersion(c, 9, {QStringLiteral("x"), {}, {}, {}}).id, 0);
    EXPECT_EQ(s.messages(c).size(), 2);
}

TEST(ConversationStore, RefusesAFileFromANewerAppWithoutTouchingIt) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("future.sqlite"));
    rawSql(path, {QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)"),
                  QStringLiteral("INSERT INTO schema_version VALUES (99)")});
    ConversationStore s;
    EXPECT_FALSE(s.open(path));
    EXPECT_NE(s.lastError().indexOf(QStringLiteral("newer")), -1) << s.lastError().toStdString();
    EXPECT_FALSE(s.isOpen());
    EXPECT_EQ(rawInt(path, QStringLiteral("SELECT version FROM schema_version")), 99);
}

TEST(ConversationStore, RejectsAFileThatIsNotADatabase) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("junk.sqlite"));
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(4096, 'x'));
    f.close();
    ConversationStore s;
    EXPECT_FALSE(s.open(path));
    EXPECT_NE(s.lastError().indexOf(path), -1) << s.lastError().toStdString();
    EXPECT_FALSE(s.open(dir.filePath(QStringLiteral("no/such/folder/c.sqlite"))));
}

TEST(ConversationStore, AFailedAppendRollsBackAndLeavesNothing) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    const auto m = s.appendMessage(12345, QStringLiteral("user"), QStringLiteral("orphan"));
    EXPECT_EQ(m.id, 0);
    EXPECT_FALSE(s.lastError().isEmpty());
    s.close();
    EXPECT_EQ(rawInt(path, QStringLiteral("SELECT COUNT(*) FROM messages")), 0);
}

TEST(ConversationStore, ExportsMarkdownAndJson) {
    QTemporaryDir dir;
    ConversationStore s;
    ASSERT_TRUE(s.open(dir.filePath(QStringLiteral("c.sqlite"))));
    const qint64 id = s.createConversation(QStringLiteral("Export me"));
    s.appendMessage(id, QStringLiteral("user"), QStringLiteral("What is 2+2?"));
    s.appendMessage(id, QStringLiteral("assistant"), QStringLiteral("It is `4`."),
                    QStringLiteral("simple sum"), {{QStringLiteral("tokens"), 5}});
    const QString md = s.exportMarkdown(id);
    EXPECT_TRUE(md.startsWith(QStringLiteral("# Export me\n")));
    EXPECT_NE(md.indexOf(QStringLiteral("## User\n\nWhat is 2+2?")), -1);
    EXPECT_NE(md.indexOf(QStringLiteral("## Assistant")), -1);
    EXPECT_NE(md.indexOf(QStringLiteral("simple sum")), -1);
    const QJsonObject root = QJsonDocument::fromJson(s.exportJson(id)).object();
    EXPECT_EQ(root.value(QStringLiteral("title")).toString(), QStringLiteral("Export me"));
    const QJsonArray msgs = root.value(QStringLiteral("messages")).toArray();
    ASSERT_EQ(msgs.size(), 2);
    EXPECT_EQ(msgs[1].toObject().value(QStringLiteral("content")).toString(),
              QStringLiteral("It is `4`."));
    EXPECT_EQ(msgs[1]
                  .toObject()
                  .value(QStringLiteral("stats"))
                  .toObject()
                  .value(QStringLiteral("tokens"))
                  .toInt(),
              5);
    EXPECT_TRUE(s.exportJson(999).isEmpty());
}

// A writer process is SIGKILLed while it streams messages: the file passes integrity_check and
// holds every message whose commit it reported, in order, with nothing half-written.
TEST(ConversationStore, AKilledWriterLosesAtMostTheMessageBeingGenerated) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("crash.sqlite"));
    for (int round = 0; round < 3; ++round) {
        QProcess p;
        p.start(QStringLiteral(NEURAL_CRASH_HELPER), {path});
        ASSERT_TRUE(p.waitForStarted(10000));
        int lastCommitted = -1;
        QByteArray pending;
        const int target = 20 + round * 15;
        while (lastCommitted < target && p.state() == QProcess::Running) {
            p.waitForReadyRead(10000);
            pending += p.readAllStandardOutput();
            qsizetype nl;
            while ((nl = pending.indexOf('\n')) >= 0) {
                const QByteArray line = pending.left(nl);
                pending.remove(0, nl + 1);
                if (line.startsWith("committed ")) lastCommitted = line.mid(10).toInt();
            }
        }
        ASSERT_GE(lastCommitted, target) << p.readAllStandardError().toStdString();
        p.kill();  // SIGKILL: no destructor, no close, mid-transaction
        p.waitForFinished(10000);
        ASSERT_EQ(p.exitStatus(), QProcess::CrashExit);
        // Lines still in the pipe: commits reported before the kill landed.
        pending += p.readAllStandardOutput();
        for (const QByteArray& line : pending.split('\n'))
            if (line.startsWith("committed "))
                lastCommitted = std::max(lastCommitted, line.mid(10).toInt());

        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        EXPECT_TRUE(s.integrityOk());
        const auto convs = s.conversations();
        ASSERT_EQ(convs.size(), round + 1);         // one per helper run
        const auto msgs = s.messages(convs[0].id);  // this round's conversation
        ASSERT_GE(msgs.size(), lastCommitted + 1);
        // The kill may land after a commit the helper had no time to report (one more row),
        // never inside one.
        EXPECT_LE(msgs.size(), lastCommitted + 2);
        for (int i = 0; i < msgs.size(); ++i) {
            EXPECT_EQ(msgs[i].position, i);
            EXPECT_EQ(msgs[i].content, QStringLiteral("message %1").arg(i));
        }
    }
}

}  // namespace
}  // namespace neural::gui
